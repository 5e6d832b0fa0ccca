import type { RedisClient } from '../../redis/connection.js';

/**
 * What Redis keeps of catalog snapshots and index artifacts: what a rollback or a slow instance needs (the newest
 * snapshot and the one the live index was built from; the current index and the one before it), bounded in count
 * and bytes. Before this, every change kept its snapshot for a day and every build its index for a day (1.5 GB in a
 * five-minute run of frequent changes).
 */
export interface Retention {
  /** Snapshots kept, newest first (at least the newest and the live index's are always kept). */
  snapshots: number;
  snapshotBytes: number;
  /** Promoted indexes kept, newest first (the current one is always kept). */
  indexes: number;
  indexBytes: number;
}

export const DEFAULT_RETENTION: Retention = { snapshots: 3, snapshotBytes: 256 * 1024 * 1024, indexes: 2, indexBytes: 2 * 1024 * 1024 * 1024 };

/**
 * Trims a family of keys registered in a sorted set (member: catalog hash, score: catalog version). Walks newest first
 * and keeps a key while both bounds allow it; the newest and the protected one (the live index's catalog) are always
 * kept. One script, so two instances trimming at once cannot delete what the other just registered and kept.
 * Slot: the family's keys (ARGV[3] .. hash) are not in KEYS, so they must share the registry's (KEYS[1]) slot: both start
 * with RedisKeys.prefix, hash-tagged on a cluster, where Redis refuses a script touching a key of another slot.
 */
const TRIM = `
local members = redis.call('ZREVRANGE', KEYS[1], 0, -1)
local keep, maxBytes, prefix, protected = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local kept, bytes, removed = 0, 0, 0
-- The newest and the protected one are kept first and use up slots and bytes; the rest fill what is left.
local always = {}
always[members[1] or ''] = true
if protected ~= '' then always[protected] = true end
for i, hash in ipairs(members) do
  if always[hash] then
    kept = kept + 1
    bytes = bytes + redis.call('STRLEN', prefix .. hash)
  end
end
for i, hash in ipairs(members) do
  local key = prefix .. hash
  local size = redis.call('STRLEN', key)
  if size == 0 then
    redis.call('ZREM', KEYS[1], hash)
  elseif not always[hash] then
    if kept < keep and bytes + size <= maxBytes then
      kept = kept + 1
      bytes = bytes + size
    else
      redis.call('DEL', key)
      redis.call('ZREM', KEYS[1], hash)
      removed = removed + 1
    end
  end
end
return removed
`;

/** Registers `hash` (at `version`) in `registry` and trims the family; returns how many keys were deleted. */
export async function registerAndTrim(
  redis: RedisClient,
  family: { registry: string; prefix: string },
  entry: { hash: string; version: number },
  bounds: { keep: number; maxBytes: number; protectedHash?: string },
): Promise<number> {
  await redis.zadd(family.registry, entry.version, entry.hash);
  const removed = await redis.eval(TRIM, 1, family.registry, String(bounds.keep), String(bounds.maxBytes), family.prefix, bounds.protectedHash ?? '');
  return Number(removed);
}
