/**
 * What a 2025-era MCP session (Mcp-Session-Id on /mcp) leaves behind for its next request, wherever that request lands:
 * the SessionStore. With Redis (src/state/redis/sessions.ts) every instance reads the same records, so a request that
 * reaches an instance not holding the session re-creates it there (src/mcp/server/http.ts); without Redis this memory
 * store keeps them in the process, as before.
 *
 * A record expires once its session is idle for its TTL (the idle timeout; shorter until the session made a request
 * after initialize); every request refreshes it. Messages between instances (a session ended by DELETE, a notification
 * for the instance holding the session's GET stream) go through `publish`/`listen`.
 */
import type { LoggingLevel } from '@modelcontextprotocol/sdk/types.js';

export interface SessionRecord {
  id: string;
  /** The protocol revision negotiated at initialize (2025-11-25, 2025-06-18, 2025-03-26). */
  protocolVersion: string;
  /** The client's `clientInfo` and `capabilities` from initialize, as sent. */
  clientInfo: { name: string; version: string; [key: string]: unknown };
  clientCapabilities: Record<string, unknown>;
  /** The key id (or subject) that opened the session: every request on it must carry the same. */
  owner: string;
  /** Whom the session counts against for the per-key session cap (a key, or a client address on an open service). */
  holder: string;
  /** What the session set with logging/setLevel. */
  logLevel?: LoggingLevel;
  /** URIs the session subscribed to with resources/subscribe. */
  subscriptions: string[];
  /** Made a request after initialize (an unused session expires sooner). */
  used: boolean;
  /** Epoch ms of the latest request. */
  lastActive: number;
}

/** What may change on a live session. */
export type SessionChange = Partial<Pick<SessionRecord, 'logLevel' | 'subscriptions' | 'used'>>;

/** A message between instances about one session. */
export type SessionSignal =
  /** The session was ended (DELETE): whoever holds a copy closes it. */
  | { type: 'ended'; session: string }
  /** A JSON-RPC notification for the client: the instance holding the session's GET stream sends it there. */
  | { type: 'notify'; session: string; message: Record<string, unknown> }
  /** The client's answer to a request an instance sent it during a call: that instance takes it. */
  | { type: 'answer'; session: string; message: Record<string, unknown> };

export interface SessionTtl {
  /** How long a used session lives without requests. */
  idleMs: number;
  /** How long a session that made no request after initialize lives. @defaultValue idleMs */
  unusedIdleMs?: number;
}

export interface SessionStore {
  /** Stores a new session. */
  create(record: SessionRecord): Promise<void>;
  /** The session, or undefined when it ended or expired. Does not refresh it. */
  get(id: string): Promise<SessionRecord | undefined>;
  /** Refreshes the session (lastActive, TTL) and applies `change`; the record as it is now, or undefined when gone. */
  touch(id: string, change?: SessionChange): Promise<SessionRecord | undefined>;
  /** Ends the session; true when it existed. */
  delete(id: string): Promise<boolean>;
  /** Live sessions counted against `holder`, on every instance. */
  count(holder: string): Promise<number>;
  /** Sends `signal` to every instance (this one included). */
  publish(signal: SessionSignal): Promise<void>;
  /** Hears every signal; one handler per store. Resolves once listening. */
  listen(handler: (signal: SessionSignal) => void): Promise<void>;
  /** Whether other instances share this store (sessions may then be re-created here). */
  readonly shared: boolean;
}

/** Bounds of what one record holds, so a client cannot grow it without limit. */
export const MAX_SUBSCRIPTIONS_STORED = 100;
const MAX_INFO_BYTES = 16_384;

/** The TTL a record gets: the idle timeout once used, the (shorter) unused one before. */
export function ttlOf(record: Pick<SessionRecord, 'used'>, ttl: SessionTtl): number {
  return record.used ? ttl.idleMs : Math.min(ttl.unusedIdleMs ?? ttl.idleMs, ttl.idleMs);
}

/** Refuses records larger than the bounds (a client's capabilities object is its own to size). */
export function boundedRecord(record: SessionRecord): SessionRecord {
  if (record.subscriptions.length > MAX_SUBSCRIPTIONS_STORED) throw new Error(`at most ${MAX_SUBSCRIPTIONS_STORED} subscriptions per session`);
  if (JSON.stringify(record.clientInfo).length + JSON.stringify(record.clientCapabilities).length > MAX_INFO_BYTES) {
    throw new Error(`a session's clientInfo and capabilities may take at most ${MAX_INFO_BYTES} bytes`);
  }
  return record;
}

/** In this process only (no Redis): the behaviour of a single instance. */
export class MemorySessionStore implements SessionStore {
  readonly shared = false;
  private readonly records = new Map<string, { record: SessionRecord; expiresAt: number }>();
  private handler: ((signal: SessionSignal) => void) | undefined;

  constructor(private readonly ttl: SessionTtl) {}

  async create(record: SessionRecord): Promise<void> {
    this.prune();
    this.records.set(record.id, { record: structuredClone(boundedRecord(record)), expiresAt: Date.now() + ttlOf(record, this.ttl) });
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    const entry = this.live(id);
    return entry && structuredClone(entry.record);
  }

  async touch(id: string, change: SessionChange = {}): Promise<SessionRecord | undefined> {
    const entry = this.live(id);
    if (!entry) return undefined;
    const record = boundedRecord({ ...entry.record, ...change, lastActive: Date.now() });
    entry.record = record;
    entry.expiresAt = Date.now() + ttlOf(record, this.ttl);
    return structuredClone(record);
  }

  async delete(id: string): Promise<boolean> {
    const existed = this.live(id) !== undefined;
    this.records.delete(id);
    return existed;
  }

  async count(holder: string): Promise<number> {
    this.prune();
    let count = 0;
    for (const { record } of this.records.values()) if (record.holder === holder) count++;
    return count;
  }

  async publish(signal: SessionSignal): Promise<void> {
    // Delivered after the caller's turn, as pub/sub would.
    const handler = this.handler;
    if (handler) queueMicrotask(() => handler(structuredClone(signal)));
  }

  async listen(handler: (signal: SessionSignal) => void): Promise<void> {
    if (this.handler) throw new Error('a handler already listens to this session store');
    this.handler = handler;
  }

  private live(id: string): { record: SessionRecord; expiresAt: number } | undefined {
    const entry = this.records.get(id);
    if (entry && entry.expiresAt <= Date.now()) {
      this.records.delete(id);
      return undefined;
    }
    return entry;
  }

  private prune(): void {
    const now = Date.now();
    for (const [id, entry] of this.records) if (entry.expiresAt <= now) this.records.delete(id);
  }
}
