/**
 * The instance registry over Redis: a heartbeat key per instance (`SET … PX ttl`, renewed several times per TTL) and a
 * channel per instance on the bus. A message is `{topic, body, from, reply}`; the answer goes back on the asker's own
 * channel. Pub/sub loses what is published while nobody listens, so an asker never waits blindly: while it waits it
 * checks the target's heartbeat, and a target gone ends the wait at once (InstanceGoneError).
 *
 * A missing heartbeat is not taken for a gone instance at first sight: Redis restarting, failing over or refusing
 * writes (out of memory) for longer than the TTL lets every heartbeat lapse at once, and the instances come back one
 * reconnect after the other. So an instance is gone only when its heartbeat is still missing `confirmMs` after this
 * instance first saw it missing, with this instance's own connection up all that time (a reconnect starts over);
 * a live instance beats again within that. Nor while this instance's own heartbeat cannot be written (Redis refusing
 * writes, out of memory, lets every heartbeat lapse while reads still work): sightings count again from its next
 * written heartbeat. A killed instance is then known gone about TTL + confirmMs after it died.
 */
import type { Logger } from 'pino';
import type { RedisBus } from '../../redis/bus.js';
import { RedisUnavailableError } from '../../redis/connection.js';
import { InstanceGoneError, InstanceHandlerError, newInstanceId, type InstanceHandler, type InstanceRegistry } from '../instances.js';

export interface RedisInstancesOptions {
  /**
   * How long an instance counts as up after its last heartbeat: a killed instance is known to be gone this long after.
   * @defaultValue 5000
   */
  heartbeatTtlMs?: number;
  /**
   * How often the heartbeat is renewed (and how often an asker checks that its target is still up).
   * @defaultValue 1000
   */
  heartbeatIntervalMs?: number;
  /**
   * How long a heartbeat must stay missing before its instance counts as gone (see above).
   * @defaultValue 3 × heartbeatIntervalMs
   */
  confirmMs?: number;
  log: Logger;
}

/** The heartbeat key's value once its instance stopped (a heartbeat is a time in ms). */
const CLOSED = 'closed';
/** How long the closed mark is kept: longer than any reader's confirmation of a missing heartbeat. */
const CLOSED_KEPT_MS = 60_000;

/** A message on an instance's channel: a question to a topic's handler, or the answer to one. */
type Envelope =
  | { topic: string; body: unknown; from: string; reply: number }
  | { answer: number; ok: true; value: unknown }
  | { answer: number; ok: false; message: string };

interface Waiting {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

export class RedisInstances implements InstanceRegistry {
  readonly id = newInstanceId();
  private readonly handlers = new Map<string, InstanceHandler>();
  private readonly waiting = new Map<number, Waiting>();
  private nextReply = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly ttlMs: number;
  private readonly intervalMs: number;
  private readonly confirmMs: number;
  /** When this instance first saw each heartbeat missing (since its connection last came up). */
  private readonly missingSince = new Map<string, number>();
  /**
   * Since when this instance's own heartbeats are written; undefined while they fail (Redis away, or refusing writes:
   * out of memory), when everyone's heartbeat lapses alike and no other instance can be judged gone.
   */
  private writingSince: number | undefined = Date.now();

  private constructor(
    private readonly bus: RedisBus,
    private readonly options: RedisInstancesOptions,
  ) {
    this.ttlMs = options.heartbeatTtlMs ?? 5_000;
    this.intervalMs = options.heartbeatIntervalMs ?? 1_000;
    this.confirmMs = options.confirmMs ?? 3 * this.intervalMs;
    // Back from an outage: beat at once (the others may be reading this instance's tasks), and forget what was seen
    // missing before (everyone's heartbeat lapsed alike).
    bus.redis.on('ready', () => {
      this.missingSince.clear();
      this.writingSince = Date.now();
      if (this.heartbeat) this.beat().catch(() => {});
    });
  }

  /** Registers this instance (first heartbeat written, channel subscribed) and keeps it registered until close(). */
  static async start(bus: RedisBus, options: RedisInstancesOptions): Promise<RedisInstances> {
    const instances = new RedisInstances(bus, options);
    await bus.listen(bus.keys.instanceChannel(instances.id), {
      message: (text) => instances.receive(text),
      // Messages missed while the subscriber was away: askers notice (timeout or a lost heartbeat) and say so.
      resync: async () => {},
      restore: () => instances.beat(),
    });
    await instances.beat();
    instances.heartbeat = setInterval(() => {
      instances.beat().catch((error: unknown) => options.log.warn({ err: error }, 'instance heartbeat not written; other instances may take this one for gone'));
    }, instances.intervalMs);
    instances.heartbeat.unref();
    return instances;
  }

  async isAlive(id: string): Promise<boolean> {
    if (id === this.id) return true;
    if (!/^[0-9a-f]{1,64}$/.test(id)) return false;
    let beat: string | null;
    try {
      beat = await this.bus.redis.get(this.bus.keys.instance(id));
    } catch (error) {
      throw new RedisUnavailableError('checking the instance running it', error);
    }
    if (beat === CLOSED) return false;
    if (beat !== null) {
      this.missingSince.delete(id);
      return true;
    }
    const now = Date.now();
    if (this.writingSince === undefined) return true;
    let since = this.missingSince.get(id);
    // Seen missing while this instance could not write its own: that sighting proves nothing.
    if (since !== undefined && since < this.writingSince) {
      this.missingSince.delete(id);
      since = undefined;
    }
    if (since === undefined) {
      // Bounded: an entry per instance seen missing; gone ones are dropped once confirmed.
      if (this.missingSince.size >= 10_000) this.missingSince.clear();
      this.missingSince.set(id, now);
      return true;
    }
    if (now - since < this.confirmMs) return true;
    return false;
  }

  handle(topic: string, handler: InstanceHandler): void {
    if (this.handlers.has(topic)) throw new Error(`a handler already handles ${topic}`);
    this.handlers.set(topic, handler);
  }

  async ask(to: string, topic: string, body: unknown, timeoutMs: number): Promise<unknown> {
    if (!(await this.isAlive(to))) throw new InstanceGoneError(to);
    const reply = ++this.nextReply;
    const answered = new Promise<unknown>((resolve, reject) => this.waiting.set(reply, { resolve, reject }));
    let watch: NodeJS.Timeout | undefined;
    let deadline: NodeJS.Timeout | undefined;
    const stopped = new Promise<never>((_resolve, reject) => {
      deadline = setTimeout(() => reject(new Error(`toolrouter instance ${to} did not answer ${topic} within ${timeoutMs} ms`)), timeoutMs);
      watch = setInterval(() => {
        this.isAlive(to).then(
          (alive) => alive || reject(new InstanceGoneError(to)),
          () => {},
        );
      }, this.intervalMs);
    });
    try {
      const message = JSON.stringify({ topic, body, from: this.id, reply } satisfies Envelope);
      await this.bus.redis.publish(this.bus.keys.instanceChannel(to), message).catch((error: unknown) => {
        throw new RedisUnavailableError(`reaching instance ${to}`, error);
      });
      return await Promise.race([answered, stopped]);
    } finally {
      clearTimeout(deadline);
      clearInterval(watch);
      this.waiting.delete(reply);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    for (const waiting of this.waiting.values()) waiting.reject(new Error('toolrouter is shutting down'));
    this.waiting.clear();
    // Gone at once for the others, rather than after the TTL and the confirmation: a closed mark, kept a while.
    await this.bus.redis.set(this.bus.keys.instance(this.id), CLOSED, 'PX', Math.max(this.ttlMs, CLOSED_KEPT_MS)).catch(() => {});
  }

  private async beat(): Promise<void> {
    try {
      await this.bus.redis.set(this.bus.keys.instance(this.id), String(Date.now()), 'PX', this.ttlMs);
    } catch (error) {
      this.writingSince = undefined;
      throw error;
    }
    this.writingSince ??= Date.now();
  }

  private receive(text: string): void {
    const envelope = JSON.parse(text) as Envelope;
    if ('answer' in envelope) {
      const waiting = this.waiting.get(envelope.answer);
      if (!waiting) return;
      if (envelope.ok) waiting.resolve(envelope.value);
      else waiting.reject(new InstanceHandlerError(envelope.message));
      return;
    }
    const handler = this.handlers.get(envelope.topic);
    const send = (answer: Envelope) =>
      void this.bus.redis.publish(this.bus.keys.instanceChannel(envelope.from), JSON.stringify(answer)).catch((error: unknown) => {
        this.options.log.warn({ err: error, topic: envelope.topic }, 'answer to another instance not sent');
      });
    if (!handler) {
      send({ answer: envelope.reply, ok: false, message: `no handler for ${envelope.topic}` });
      return;
    }
    handler(envelope.body).then(
      (value) => send({ answer: envelope.reply, ok: true, value: value ?? null }),
      (error: unknown) => send({ answer: envelope.reply, ok: false, message: error instanceof Error ? error.message : String(error) }),
    );
  }
}
