/**
 * Where audit records live (STYLE habit 8): a Redis stream shared by every instance (redis-store.ts), JSON Lines files
 * under `<stateDir>/audit/` (file-store.ts), or this process's memory when neither is configured. Each store links
 * what it appends into one chain (chain.ts) and reads newest first.
 */
import type { AuditBody } from './chain.js';
import { link } from './chain.js';
import type { AuditDecision, AuditRecord } from './types.js';

/** A read of the trail (GET /v1/audit, `toolrouter audit export`). Times are epoch milliseconds, inclusive. */
export interface AuditQuery {
  since?: number;
  until?: number;
  /** A caller id (`admin`, a key id, `user:<sub>`). */
  caller?: string;
  tool?: string;
  decision?: AuditDecision;
  limit: number;
  /** Only records older than this id (the `next` of the page before). */
  cursor?: string;
}

export interface AuditPage {
  records: AuditRecord[];
  /** Where the next (older) page starts; absent when this is the last. */
  next?: string;
}

export interface AuditStore {
  /** Links `bodies` after the chain's last record and appends them, in order, as one step. Rejects when it cannot. */
  append(bodies: readonly AuditBody[]): Promise<void>;
  /** Newest first, filtered. */
  read(query: AuditQuery): Promise<AuditPage>;
  /** Every record present, oldest first (verify, export). */
  scan(): AsyncIterable<AuditRecord>;
  close(): Promise<void>;
}

/** Record ids are `<epoch ms>-<sequence>`, Redis stream ids' form, so cursors mean the same on every store. */
export function compareIds(a: string, b: string): number {
  const [aMs = 0, aSeq = 0] = a.split('-').map(Number);
  const [bMs = 0, bSeq = 0] = b.split('-').map(Number);
  return aMs - bMs || aSeq - bSeq;
}

/** The epoch milliseconds an id was handed out at. */
export function idTime(id: string): number {
  return Number(id.split('-')[0]);
}

/** Whether a record passes a query's filters (cursor and times included). */
export function matches(record: AuditRecord, query: AuditQuery): boolean {
  if (query.cursor !== undefined && compareIds(record.id, query.cursor) >= 0) return false;
  const time = Date.parse(record.time);
  if (query.since !== undefined && time < query.since) return false;
  if (query.until !== undefined && time > query.until) return false;
  if (query.caller !== undefined && record.caller.id !== query.caller) return false;
  if (query.tool !== undefined && record.tool !== query.tool) return false;
  return query.decision === undefined || record.decision === query.decision;
}

/** Hands out increasing `<ms>-<seq>` ids within one process. */
export class IdClock {
  private lastMs = 0;
  private seq = 0;

  /** The next id, never below `after` (the last id already stored). */
  next(after?: string): string {
    const now = Date.now();
    const [afterMs = 0, afterSeq = -1] = after?.split('-').map(Number) ?? [];
    if (afterMs > this.lastMs || (afterMs === this.lastMs && afterSeq >= this.seq)) {
      this.lastMs = afterMs;
      this.seq = afterSeq;
    }
    if (now > this.lastMs) {
      this.lastMs = now;
      this.seq = 0;
    } else {
      this.seq++;
    }
    return `${this.lastMs}-${this.seq}`;
  }
}

/** No Redis, no state directory: the newest `maxEntries` records in this process (GET /v1/audit still answers). */
export class MemoryAuditStore implements AuditStore {
  private readonly records: AuditRecord[] = [];
  private readonly ids = new IdClock();

  constructor(private readonly maxEntries: number) {}

  async append(bodies: readonly AuditBody[]): Promise<void> {
    const last = this.records.at(-1);
    for (const { prev, hash, body } of link(last?.hash ?? '', bodies)) {
      this.records.push({ ...body, id: this.ids.next(this.records.at(-1)?.id), prev, hash });
    }
    if (this.records.length > this.maxEntries) this.records.splice(0, this.records.length - this.maxEntries);
  }

  async read(query: AuditQuery): Promise<AuditPage> {
    return pageOf(newestFirst(this.records), query);
  }

  async *scan(): AsyncIterable<AuditRecord> {
    yield* [...this.records];
  }

  async close(): Promise<void> {}
}

function* newestFirst(records: readonly AuditRecord[]): Iterable<AuditRecord> {
  for (let i = records.length - 1; i >= 0; i--) yield records[i]!;
}

/** Takes the first `limit` matching records of a newest-first sequence; `next` when one more exists. */
export async function pageOf(records: Iterable<AuditRecord> | AsyncIterable<AuditRecord>, query: AuditQuery): Promise<AuditPage> {
  const page: AuditRecord[] = [];
  for await (const record of records) {
    // A record is appended after its attempt started (id time >= time), so once ids fall below `since` so do times.
    if (query.since !== undefined && idTime(record.id) < query.since) break;
    if (!matches(record, query)) continue;
    if (page.length === query.limit) return { records: page, next: page.at(-1)!.id };
    page.push(record);
  }
  return { records: page };
}
