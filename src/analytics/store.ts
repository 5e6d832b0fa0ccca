import type { RedisBus } from '../redis/bus.js';
import { withRedis, type RedisClient } from '../redis/connection.js';
import { DAY_MS, type SearchRecord } from './types.js';

/** What a store keeps: the newest `maxEntries` searches, none older than `maxAgeDays`. */
export interface LogRetention {
  maxEntries: number;
  maxAgeDays: number;
}

/**
 * A search still waiting for its call: found again by `match` (a hash of caller and query, the pair feedback credits
 * by) until `ttlMs` has passed.
 */
export interface PendingSearch {
  match: string;
  ttlMs: number;
}

/** Searches of one caller and query held for crediting at once (newest kept): an agent calls what it found soon. */
export const PENDING_PER_MATCH = 16;

/**
 * Where the search log lives: in-process (MemorySearchLogStore) or in Redis for every instance (RedisSearchLogStore),
 * picked once at assembly. Contract, both implementations (test/unit/analytics/store.test.ts):
 * - `append` keeps at most `maxEntries` records and none older than `maxAgeDays`, dropping the oldest first.
 * - `credit` sets `called` on the newest pending search under `match` whose results hold `tool` and that has no
 *   `called` yet, and returns it; a search is credited once; after its `ttlMs` a search is no longer pending.
 * - `list` answers newest first, only records at or after `since`, at most `limit` that pass `filter`.
 */
export interface SearchLogStore {
  append(record: SearchRecord, pending?: PendingSearch): Promise<void>;
  credit(match: string, tool: string): Promise<SearchRecord | undefined>;
  list(query: { since?: number; limit: number; filter?: (record: SearchRecord) => boolean }): Promise<SearchRecord[]>;
  /** The tool called after each search (undefined: none, or the search is gone). */
  calledOf(ids: readonly string[]): Promise<(string | undefined)[]>;
}

/** One process's log: a Map in time order (appends come in time order), with the pending searches beside it. */
export class MemorySearchLogStore implements SearchLogStore {
  private readonly records = new Map<string, SearchRecord>();
  private readonly pending = new Map<string, { ids: string[]; expires: number }>();

  constructor(
    private readonly retention: LogRetention,
    private readonly now: () => number = Date.now,
  ) {}

  async append(record: SearchRecord, pending?: PendingSearch): Promise<void> {
    this.records.set(record.id, { ...record, results: [...record.results] });
    const cutoff = this.now() - this.retention.maxAgeDays * DAY_MS;
    for (const [id, kept] of this.records) {
      if (this.records.size <= this.retention.maxEntries && kept.time >= cutoff) break;
      this.records.delete(id);
    }
    if (pending) {
      const now = this.now();
      const held = this.pending.get(pending.match);
      const ids = held && held.expires > now ? held.ids : [];
      this.pending.delete(pending.match);
      this.pending.set(pending.match, { ids: [...ids, record.id].slice(-PENDING_PER_MATCH), expires: now + pending.ttlMs });
      // Bounded like the records: the oldest callers' pending searches go first.
      for (const [match, entry] of this.pending) {
        if (this.pending.size <= this.retention.maxEntries && entry.expires > now) break;
        this.pending.delete(match);
      }
    }
  }

  async credit(match: string, tool: string): Promise<SearchRecord | undefined> {
    const held = this.pending.get(match);
    if (!held || held.expires <= this.now()) return undefined;
    for (let i = held.ids.length - 1; i >= 0; i--) {
      const record = this.records.get(held.ids[i]!);
      if (!record || record.called !== undefined || !record.results.some((result) => result.name === tool)) continue;
      record.called = tool;
      return { ...record };
    }
    return undefined;
  }

  async list({ since = 0, limit, filter }: { since?: number; limit: number; filter?: (record: SearchRecord) => boolean }): Promise<SearchRecord[]> {
    const out: SearchRecord[] = [];
    const all = [...this.records.values()];
    for (let i = all.length - 1; i >= 0 && out.length < limit; i--) {
      const record = all[i]!;
      if (record.time < since) break;
      if (!filter || filter(record)) out.push({ ...record });
    }
    return out;
  }

  async calledOf(ids: readonly string[]): Promise<(string | undefined)[]> {
    return ids.map((id) => this.records.get(id)?.called);
  }
}

/**
 * Appends a search and trims the log, atomically. KEYS: time zset, records hash, called hash, pending list (or the
 * zset again when none). ARGV: id, time, record JSON, cutoff time, maxEntries, pending item JSON ('' for none), ttl ms,
 * pending bound.
 */
const APPEND = `
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[5])
if over > #old then old = redis.call('ZRANGE', KEYS[1], 0, over - 1) end
for i = 1, #old, 500 do
  local batch = {unpack(old, i, math.min(i + 499, #old))}
  redis.call('ZREM', KEYS[1], unpack(batch))
  redis.call('HDEL', KEYS[2], unpack(batch))
  redis.call('HDEL', KEYS[3], unpack(batch))
end
if ARGV[6] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[6])
  redis.call('LTRIM', KEYS[4], -tonumber(ARGV[8]), -1)
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
end
return #old
`;

/**
 * Credits the newest pending search holding the tool that has no call yet. KEYS: pending list, called hash, records
 * hash. ARGV: tool. Returns the record's JSON, or false.
 */
const CREDIT = `
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for i = #items, 1, -1 do
  local item = cjson.decode(items[i])
  for _, name in ipairs(item.tools) do
    if name == ARGV[1] then
      if redis.call('HEXISTS', KEYS[3], item.id) == 1 and redis.call('HSETNX', KEYS[2], item.id, ARGV[1]) == 1 then
        return redis.call('HGET', KEYS[3], item.id)
      end
      break
    end
  end
end
return false
`;

/** Records read per round trip while listing. */
const PAGE = 500;

/**
 * One log for every instance: a sorted set of ids by time, a hash of records, a hash of the tool called after each,
 * and a short list per caller and query of the searches still waiting for a call (expiring with the window). All keys
 * share the deployment's prefix, so on a cluster they sit in one slot and the scripts may span them.
 */
export class RedisSearchLogStore implements SearchLogStore {
  private readonly redis: RedisClient;
  private readonly byTime: string;
  private readonly records: string;
  private readonly called: string;

  constructor(
    private readonly bus: Pick<RedisBus, 'redis' | 'keys'>,
    private readonly retention: LogRetention,
    private readonly now: () => number = Date.now,
  ) {
    this.redis = bus.redis;
    this.byTime = bus.keys.key('analytics', 'searches');
    this.records = bus.keys.key('analytics', 'search');
    this.called = bus.keys.key('analytics', 'called');
  }

  private pendingKey(match: string): string {
    return this.bus.keys.key('analytics', 'pending', match);
  }

  async append(record: SearchRecord, pending?: PendingSearch): Promise<void> {
    const cutoff = this.now() - this.retention.maxAgeDays * DAY_MS;
    const item = pending ? JSON.stringify({ id: record.id, tools: record.results.map((result) => result.name) }) : '';
    await withRedis('recording a search', () =>
      this.redis.eval(
        APPEND,
        4,
        this.byTime,
        this.records,
        this.called,
        pending ? this.pendingKey(pending.match) : this.byTime,
        record.id,
        String(record.time),
        JSON.stringify(record),
        String(cutoff),
        String(this.retention.maxEntries),
        item,
        String(pending?.ttlMs ?? 0),
        String(PENDING_PER_MATCH),
      ),
    );
  }

  async credit(match: string, tool: string): Promise<SearchRecord | undefined> {
    const json = (await withRedis('crediting a search', () => this.redis.eval(CREDIT, 3, this.pendingKey(match), this.called, this.records, tool))) as string | null;
    return json ? { ...(JSON.parse(json) as SearchRecord), called: tool } : undefined;
  }

  async list({ since = 0, limit, filter }: { since?: number; limit: number; filter?: (record: SearchRecord) => boolean }): Promise<SearchRecord[]> {
    const out: SearchRecord[] = [];
    let offset = 0;
    while (out.length < limit) {
      const ids = await withRedis('reading the search log', () => this.redis.zrevrangebyscore(this.byTime, '+inf', String(since), 'LIMIT', offset, PAGE));
      if (ids.length === 0) break;
      offset += ids.length;
      const [records, called] = await withRedis('reading the search log', () =>
        Promise.all([this.redis.hmget(this.records, ...ids), this.redis.hmget(this.called, ...ids)]),
      );
      records.forEach((json, i) => {
        if (!json || out.length >= limit) return;
        const record = JSON.parse(json) as SearchRecord;
        const tool = called[i];
        if (tool) record.called = tool;
        if (!filter || filter(record)) out.push(record);
      });
      if (ids.length < PAGE) break;
    }
    return out;
  }

  async calledOf(ids: readonly string[]): Promise<(string | undefined)[]> {
    if (ids.length === 0) return [];
    const called = await withRedis('reading the search log', () => this.redis.hmget(this.called, ...ids));
    return called.map((tool) => tool ?? undefined);
  }

  /** Removes every key of this log (tests, and an operator clearing it). */
  async clear(): Promise<void> {
    const pattern = this.bus.keys.key('analytics', 'pending', '*');
    const pending: string[] = [];
    // Tests use one node; on a cluster the pending lists expire within the window by themselves.
    if ('scanStream' in this.redis && !('nodes' in this.redis)) {
      for await (const keys of this.redis.scanStream({ match: pattern, count: 500 }) as AsyncIterable<string[]>) pending.push(...keys);
    }
    await this.redis.del(this.byTime, this.records, this.called, ...pending);
  }
}
