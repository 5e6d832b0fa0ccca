/**
 * The instance registry over Redis: a heartbeat key per instance (`SET … PX ttl`, renewed several times per TTL) and a
 * channel per instance on the bus. A message is `{topic, body, from, reply}`; the answer goes back on the asker's own
 * channel. Pub/sub loses what is published while nobody listens, so an asker never waits blindly: while it waits it
 * checks the target's heartbeat, and a target gone ends the wait at once (InstanceGoneError).
 */
import type { Logger } from 'pino';
import type { RedisBus } from '../../redis/bus.js';
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
  log: Logger;
}

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

  private constructor(
    private readonly bus: RedisBus,
    private readonly options: RedisInstancesOptions,
  ) {
    this.ttlMs = options.heartbeatTtlMs ?? 5_000;
    this.intervalMs = options.heartbeatIntervalMs ?? 1_000;
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
    return (await this.bus.redis.exists(this.bus.keys.instance(id))) === 1;
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
      await this.bus.redis.publish(this.bus.keys.instanceChannel(to), JSON.stringify({ topic, body, from: this.id, reply } satisfies Envelope));
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
    // Gone at once for the others, rather than after the TTL.
    await this.bus.redis.del(this.bus.keys.instance(this.id)).catch(() => {});
  }

  private async beat(): Promise<void> {
    await this.bus.redis.set(this.bus.keys.instance(this.id), String(Date.now()), 'PX', this.ttlMs);
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
