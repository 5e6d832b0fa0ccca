/**
 * The audit trail in Redis: one stream shared by every API instance (`<prefix>:audit`), with the hash of its newest
 * record beside it (`<prefix>:audit:head`, same hash slot on a cluster), bounded by XADD MAXLEN ~ and a periodic
 * XTRIM MINID. Hashing stays in Node (Redis's Lua has SHA-1, not SHA-256); the append script only checks the link.
 */
import type { RedisClient, RedisKeys } from '../redis/connection.js';
import { link, type AuditBody } from './chain.js';
import { pageOf, type AuditPage, type AuditQuery, type AuditStore } from './store.js';
import type { AuditRecord } from './types.js';

/**
 * Appends a batch of linked records if, and only if, the chain's head is still the `prev` the writer linked them
 * after. The race it closes: two instances appending at once would both read head H and both write a record whose
 * prev is H, forking the chain; here the second finds the head moved, gets the new head back, re-links and retries.
 * Head and XADD change in one script, so no reader sees a record the head does not cover.
 *
 * KEYS[1]: the stream; KEYS[2]: the head. ARGV[1]: expected head ('' for an empty trail); ARGV[2]: MAXLEN;
 * ARGV[3]: the new head; ARGV[4..]: records (JSON). Returns {1} when appended, {0, head} when the head moved.
 */
const APPEND = `
local head = redis.call('GET', KEYS[2]) or ''
if head ~= ARGV[1] then return {0, head} end
for i = 4, #ARGV do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'r', ARGV[i])
end
redis.call('SET', KEYS[2], ARGV[3])
return {1}`;

/** Entries read per XRANGE round trip. */
const CHUNK = 500;
/** Most entries one read looks at before it answers with what it found and a cursor: no read holds Redis long. */
const MAX_SCANNED = 50_000;
/** How often old records are trimmed by age. */
const TRIM_EVERY_MS = 60_000;

export interface RedisAuditStoreOptions {
  redis: RedisClient;
  keys: RedisKeys;
  maxEntries: number;
  maxAgeDays: number;
}

export class RedisAuditStore implements AuditStore {
  private readonly stream: string;
  private readonly head: string;
  private lastTrim = 0;

  constructor(private readonly options: RedisAuditStoreOptions) {
    this.stream = options.keys.key('audit');
    this.head = options.keys.key('audit', 'head');
  }

  async append(bodies: readonly AuditBody[]): Promise<void> {
    const { redis } = this.options;
    let head = (await redis.get(this.head)) ?? '';
    for (let attempt = 0; attempt < 20; attempt++) {
      const linked = link(head, bodies);
      const records = linked.map(({ prev, hash, body }) => JSON.stringify({ ...body, prev, hash }));
      const reply = (await redis.eval(APPEND, 2, this.stream, this.head, head, String(this.options.maxEntries), linked.at(-1)!.hash, ...records)) as [number, string?];
      if (reply[0] === 1) {
        await this.trimByAge();
        return;
      }
      head = reply[1] ?? '';
    }
    throw new Error('the audit stream kept moving under 20 appends in a row');
  }

  private async trimByAge(): Promise<void> {
    const now = Date.now();
    if (now - this.lastTrim < TRIM_EVERY_MS) return;
    this.lastTrim = now;
    await this.options.redis.xtrim(this.stream, 'MINID', '~', String(Math.floor(now - this.options.maxAgeDays * 86_400_000)));
  }

  async read(query: AuditQuery): Promise<AuditPage> {
    const progress: ScanProgress = { scanned: 0 };
    const page = await pageOf(this.newestFirst(query, progress), query);
    // Bounded: a filter that matches little answers with what the first MAX_SCANNED records held, and where to go on.
    if (page.next === undefined && progress.scanned >= MAX_SCANNED && progress.last !== undefined) return { ...page, next: progress.last };
    return page;
  }

  private async *newestFirst(query: AuditQuery, progress: ScanProgress): AsyncIterable<AuditRecord> {
    let end = query.cursor === undefined ? '+' : `(${query.cursor}`;
    const start = query.since === undefined ? '-' : String(query.since);
    while (progress.scanned < MAX_SCANNED) {
      const entries = await this.options.redis.xrevrange(this.stream, end, start, 'COUNT', CHUNK);
      for (const [id, fields] of entries) {
        progress.scanned++;
        progress.last = id;
        yield recordOf(id, fields);
      }
      if (entries.length < CHUNK) return;
      end = `(${entries.at(-1)![0]}`;
    }
  }

  async *scan(): AsyncIterable<AuditRecord> {
    let start = '-';
    for (;;) {
      const entries = await this.options.redis.xrange(this.stream, start, '+', 'COUNT', CHUNK);
      for (const [id, fields] of entries) yield recordOf(id, fields);
      if (entries.length < CHUNK) return;
      start = `(${entries.at(-1)![0]}`;
    }
  }

  async close(): Promise<void> {}
}

interface ScanProgress {
  scanned: number;
  last?: string;
}

function recordOf(id: string, fields: string[]): AuditRecord {
  const json = fields[fields.indexOf('r') + 1];
  return { ...(JSON.parse(json ?? '{}') as Omit<AuditRecord, 'id'>), id };
}
