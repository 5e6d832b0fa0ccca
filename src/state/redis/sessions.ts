/**
 * 2025-era MCP sessions in Redis, shared by every API instance (src/state/sessions.ts says what a session record is).
 *
 * Layout (names from RedisKeys): one hash per session (`mcp:session:<id>`: the fixed part as JSON in `fixed`, and the
 * fields a live session changes on their own, so concurrent changes on two instances do not overwrite each other),
 * expiring after the session's idle TTL and refreshed by every request; one set of session ids per holder for the
 * per-key cap, pruned of ended sessions when counted and expiring with its newest session; one pub/sub channel for
 * session messages between instances. A record is about 1 KB (the client's capabilities are most of it; bounded).
 */
import type { LoggingLevel } from '@modelcontextprotocol/sdk/types.js';
import type { RedisBus } from '../../redis/bus.js';
import { boundedRecord, ttlOf, type SessionChange, type SessionRecord, type SessionSignal, type SessionStore, type SessionTtl } from '../sessions.js';

/** Refreshes a session if it exists: sets the given fields and lastActive, renews the TTL; returns the hash. */
const TOUCH = `
if redis.call('exists', KEYS[1]) == 0 then return false end
for i = 4, #ARGV, 2 do redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('hset', KEYS[1], 'lastActive', ARGV[1])
local ttl = tonumber(ARGV[3])
if redis.call('hget', KEYS[1], 'used') == '1' then ttl = tonumber(ARGV[2]) end
redis.call('pexpire', KEYS[1], ttl)
return redis.call('hgetall', KEYS[1])
`;

/** Signals larger than this are not sent (a notification is small; a flood of big ones would burden every instance). */
const MAX_SIGNAL_BYTES = 256 * 1024;

export class RedisSessionStore implements SessionStore {
  readonly shared = true;

  constructor(
    private readonly bus: RedisBus,
    private readonly ttl: SessionTtl,
  ) {}

  private get redis() {
    return this.bus.redis;
  }

  async create(record: SessionRecord): Promise<void> {
    const bounded = boundedRecord(record);
    const key = this.bus.keys.mcpSession(record.id);
    const holderKey = this.bus.keys.mcpSessionHolder(record.holder);
    const ttl = ttlOf(bounded, this.ttl);
    await this.bus.writes.run('storing the MCP session', (redis) =>
      redis
        .multi()
        .hset(key, encode(bounded))
        .pexpire(key, ttl)
        .sadd(holderKey, record.id)
        .pexpire(holderKey, this.ttl.idleMs)
        .exec()
        .then(checked),
    );
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    const hash = await this.redis.hgetall(this.bus.keys.mcpSession(id));
    return Object.keys(hash).length === 0 ? undefined : decode(hash);
  }

  async touch(id: string, change: SessionChange = {}): Promise<SessionRecord | undefined> {
    const fields = Object.entries(encodeChange(change)).flat();
    const unused = Math.min(this.ttl.unusedIdleMs ?? this.ttl.idleMs, this.ttl.idleMs);
    const reply = (await this.redis.eval(TOUCH, 1, this.bus.keys.mcpSession(id), String(Date.now()), String(this.ttl.idleMs), String(unused), ...fields)) as string[] | null;
    if (!reply) return undefined;
    const hash: Record<string, string> = {};
    for (let i = 0; i + 1 < reply.length; i += 2) hash[reply[i]!] = reply[i + 1]!;
    const record = decode(hash);
    // The holder's set lives as long as its newest session; refreshing it needs no answer.
    void this.redis.pexpire(this.bus.keys.mcpSessionHolder(record.holder), this.ttl.idleMs).catch(() => {});
    return record;
  }

  async delete(id: string): Promise<boolean> {
    const key = this.bus.keys.mcpSession(id);
    const hash = await this.redis.hgetall(key);
    if (Object.keys(hash).length === 0) return false;
    const record = decode(hash);
    const [[error, removed] = []] = checked(await this.redis.multi().del(key).srem(this.bus.keys.mcpSessionHolder(record.holder), id).exec());
    if (error) throw error;
    return removed === 1;
  }

  async count(holder: string): Promise<number> {
    const holderKey = this.bus.keys.mcpSessionHolder(holder);
    const ids = await this.redis.smembers(holderKey);
    if (ids.length === 0) return 0;
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.exists(this.bus.keys.mcpSession(id));
    const alive = checked(await pipeline.exec()).map(([, exists]) => exists === 1);
    const ended = ids.filter((_, index) => !alive[index]);
    if (ended.length > 0) await this.redis.srem(holderKey, ...ended);
    return ids.length - ended.length;
  }

  async publish(signal: SessionSignal): Promise<void> {
    const text = JSON.stringify(signal);
    if (text.length > MAX_SIGNAL_BYTES) throw new Error(`a session message may take at most ${MAX_SIGNAL_BYTES} bytes`);
    await this.redis.publish(this.bus.keys.mcpSessionChannel, text);
  }

  async listen(handler: (signal: SessionSignal) => void): Promise<void> {
    await this.bus.listen(this.bus.keys.mcpSessionChannel, {
      message: (text) => handler(JSON.parse(text) as SessionSignal),
      // What was published while away is lost: an ended session is found gone at its next request (the record is
      // deleted), a missed notification is lost as it would be on a dropped GET stream.
      resync: async () => {},
    });
  }
}

function checked<T>(results: [Error | null, T][] | null): [Error | null, T][] {
  if (!results) throw new Error('Redis transaction aborted');
  const failed = results.find(([error]) => error);
  if (failed) throw failed[0];
  return results;
}

function encode(record: SessionRecord): Record<string, string> {
  const { logLevel, subscriptions, used, lastActive, ...fixed } = record;
  return { fixed: JSON.stringify(fixed), ...encodeChange({ logLevel, subscriptions, used }), lastActive: String(lastActive) };
}

function encodeChange(change: SessionChange): Record<string, string> {
  const fields: Record<string, string> = {};
  if (change.logLevel !== undefined) fields.logLevel = change.logLevel;
  if (change.subscriptions !== undefined) fields.subscriptions = JSON.stringify(boundedRecordSubscriptions(change.subscriptions));
  if (change.used !== undefined) fields.used = change.used ? '1' : '0';
  return fields;
}

function boundedRecordSubscriptions(subscriptions: string[]): string[] {
  return boundedRecord({ subscriptions, clientInfo: { name: '', version: '' }, clientCapabilities: {} } as unknown as SessionRecord).subscriptions;
}

function decode(hash: Record<string, string>): SessionRecord {
  const fixed = JSON.parse(hash.fixed ?? '{}') as Omit<SessionRecord, 'logLevel' | 'subscriptions' | 'used' | 'lastActive'>;
  return {
    ...fixed,
    ...(hash.logLevel ? { logLevel: hash.logLevel as LoggingLevel } : {}),
    subscriptions: hash.subscriptions ? (JSON.parse(hash.subscriptions) as string[]) : [],
    used: hash.used === '1',
    lastActive: Number(hash.lastActive),
  };
}
