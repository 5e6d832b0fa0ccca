import type { Logger } from 'pino';
import { withRedis, type RedisClient, type RedisKeys } from '../redis/connection.js';
import type { RedisBus } from '../redis/bus.js';
import { DAY_MS, type FeedbackEvent } from './types.js';

/** What a store keeps: the newest `maxEvents` events, none older than `maxAgeDays`. */
export interface Retention {
  maxEvents: number;
  maxAgeDays: number;
}

/**
 * Where feedback events live. The search side keeps its own in-memory copy (FeedbackNeighbours); a store is the record
 * that copy is loaded from at start and that other instances' events arrive through.
 */
export interface FeedbackStore {
  /** Every retained event, oldest first; `onRemote` then hears events other instances append. */
  start(onRemote: (event: FeedbackEvent) => void): Promise<FeedbackEvent[]>;
  append(event: FeedbackEvent): Promise<void>;
  close(): Promise<void>;
}

/** Events of this process only (no Redis): kept within the retention limits, gone with the process. */
export class MemoryFeedbackStore implements FeedbackStore {
  private events: FeedbackEvent[] = [];

  constructor(
    private readonly retention: Retention,
    private readonly now: () => number = Date.now,
  ) {}

  async start(): Promise<FeedbackEvent[]> {
    this.trim();
    return [...this.events];
  }

  async append(event: FeedbackEvent): Promise<void> {
    this.events.push(event);
    if (this.events.length > this.retention.maxEvents * 2) this.trim();
  }

  /** The retained events, oldest first (tests and the eval replay read them). */
  list(): FeedbackEvent[] {
    this.trim();
    return [...this.events];
  }

  async close(): Promise<void> {}

  private trim(): void {
    const cutoff = this.now() - this.retention.maxAgeDays * DAY_MS;
    this.events = this.events.filter((event) => event.time >= cutoff).slice(-this.retention.maxEvents);
  }
}

/** An event as stored in Redis: the embedding as base64 of its float32 bytes (400 bytes at 100 dimensions). */
interface StoredEvent {
  id: string;
  q: string;
  e: string;
  m: string;
  t: string;
  r: boolean;
  at: number;
  s: string;
}

export function encodeEvent(event: FeedbackEvent): string {
  const { embedding } = event;
  const stored: StoredEvent = {
    id: event.id,
    q: event.query,
    e: Buffer.from(embedding.buffer, embedding.byteOffset, embedding.byteLength).toString('base64'),
    m: event.model,
    t: event.tool,
    r: event.relevant,
    at: event.time,
    s: event.scope,
  };
  return JSON.stringify(stored);
}

export function decodeEvent(text: string): FeedbackEvent {
  const stored = JSON.parse(text) as StoredEvent;
  const bytes = Buffer.from(stored.e, 'base64');
  // Copied so the vector is aligned and owns its memory (Buffer slices share a pool).
  const embedding = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(embedding.buffer).set(bytes);
  return { id: stored.id, query: stored.q, embedding, model: stored.m, tool: stored.t, relevant: stored.r, time: stored.at, scope: stored.s };
}

/**
 * Appends, trims and announces in one script, so the retention limits hold after every write and no instance can
 * miss an event that was stored. The sorted set is scored by time: trimming by age and by count are range removals.
 * Members lead with a sequence number, so events of the same millisecond keep their order (Redis orders ties by member).
 * Slot: KEYS (events, channel, events:seq) all start with RedisKeys.prefix, one hash slot on a cluster.
 */
const APPEND = `
local seq = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[1], ARGV[2], string.format('%015d ', seq) .. ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[4]) + 1))
redis.call('PUBLISH', KEYS[2], ARGV[5] .. ' ' .. ARGV[1])
return 1
`;

/**
 * Events shared by every API instance, surviving restarts: a sorted set under the deployment's key prefix, and a
 * channel on which each append is announced to the other instances (an instance ignores its own announcements). After a
 * reconnect the retained events are read again and handed on like announcements (the receiver ignores ids it holds),
 * since what was announced while this instance was away is lost.
 */
export class RedisFeedbackStore implements FeedbackStore {
  private readonly origin = Math.random().toString(36).slice(2, 12);
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(
    private readonly bus: RedisBus,
    private readonly retention: Retention,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.redis = bus.redis;
    this.keys = bus.keys;
  }

  async start(onRemote: (event: FeedbackEvent) => void): Promise<FeedbackEvent[]> {
    await this.bus.listen(this.keys.feedbackChannel, {
      message: (message) => {
        const space = message.indexOf(' ');
        if (message.slice(0, space) === this.origin) return;
        try {
          onRemote(decodeEvent(message.slice(space + 1)));
        } catch (error) {
          this.log.warn({ err: error }, 'ignoring a malformed feedback event announcement');
        }
      },
      resync: async () => {
        for (const event of await this.retained()) onRemote(event);
      },
    });
    return this.retained();
  }

  async append(event: FeedbackEvent): Promise<void> {
    const cutoff = this.now() - this.retention.maxAgeDays * DAY_MS;
    await withRedis('recording feedback', () =>
      this.redis.eval(
        APPEND,
        3,
        this.keys.feedbackEvents,
        this.keys.feedbackChannel,
        `${this.keys.feedbackEvents}:seq`,
        encodeEvent(event),
        String(event.time),
        String(cutoff),
        String(this.retention.maxEvents),
        this.origin,
      ),
    );
  }

  /** The bus is the process's and closes with it. */
  async close(): Promise<void> {}

  /** Every retained event, oldest first: at most maxEvents (the append script trims to that, so this is bounded). */
  private async retained(): Promise<FeedbackEvent[]> {
    const cutoff = this.now() - this.retention.maxAgeDays * DAY_MS;
    const stored = await this.redis.zrangebyscore(this.keys.feedbackEvents, cutoff, '+inf');
    const events: FeedbackEvent[] = [];
    for (const member of stored.slice(-this.retention.maxEvents)) {
      try {
        events.push(decodeEvent(member.slice(member.indexOf(' ') + 1)));
      } catch (error) {
        this.log.warn({ err: error }, 'skipping a malformed stored feedback event');
      }
    }
    return events;
  }
}
