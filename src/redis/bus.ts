import { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import { connectRedis, describeRedis, RedisGate, type RedisClient, type RedisKeys } from './connection.js';
import { RedisGeneration } from './generation.js';
import { RedisHealth } from './health.js';
import { DEFAULT_COMMAND_TIMEOUT_MS, DEFAULT_HEALTH_CHECK_MS, type RedisSettings } from './settings.js';

/** What a process needs to open its bus (the way BullMQ gives each class its own options). */
export interface RedisBusOptions {
  /** Where Redis is (any form: URL, Sentinel, Cluster); `url` is the shorthand for `{ url }`. */
  redis?: RedisSettings;
  url?: string;
  keys: RedisKeys;
  log: Logger;
  /**
   * How this process's connections show in `CLIENT LIST`: the command connection as `<connectionName>`, the subscriber
   * as `<connectionName>:events`. Letters, digits and `-_.:` only (Redis refuses spaces in names).
   */
  connectionName: string;
  /**
   * How often to check the generation marker (src/redis/generation.ts), and run holders' `restore` when Redis lost its
   * data. Unset: no check (a process that holds nothing others need, such as an index worker).
   */
  generationCheckMs?: number;
  /** Set to 1 or 0 after every health probe (the API's `toolrouter_redis_up`). */
  healthGauge?: { set(value: number): void };
}

/** What the owner of a channel does with its messages, after a reconnect, and after Redis lost its data. */
export interface ChannelHandler {
  message(text: string): void;
  /**
   * The subscription was renewed after the connection dropped: whatever was announced meanwhile is lost, so re-read the
   * state those announcements would have changed. May throw; the bus retries.
   */
  resync(): Promise<void>;
  /** Redis lost its data (generation marker gone or replaced): store again what this instance holds. May throw. */
  restore?(): Promise<void>;
}

/** Waits after a failed recovery, doubling up to this bound. */
const MAX_RECOVERY_DELAY_MS = 5_000;

/**
 * One per process: a command connection every store shares (BullMQ's Queue included, see RedisIndexPipeline), and a
 * subscriber connection opened on the first `listen`, which dispatches by channel. Redis does not replay what was
 * published while a subscriber was away, so after every reconnect (of either connection) the bus renews the
 * subscriptions, checks the generation marker (restoring held state first if Redis lost its data), then asks every
 * handler to re-read its state, in the order they started listening, retrying until all of them succeed. Feedback's
 * re-read is the largest: its retained events, 10,000 by default (about 5 MB), once per reconnect.
 */
export class RedisBus {
  readonly redis: RedisClient;
  readonly keys: RedisKeys;
  /**
   * The keyed read/write probe of the slot (cluster) or master (Sentinel) toolrouter writes to; `/ready` shows it. Its
   * timer runs once `health.start()` is called (the API does; a worker serves no writes).
   */
  readonly health: RedisHealth;
  /**
   * Writes on a request's path (catalog sources, keys, runtime servers, search settings) go through it: refused at once
   * while the probe or the connection says Redis is away, bounded by redis.commandTimeoutMs otherwise.
   */
  readonly writes: RedisGate;
  private subscriber: RedisClient | undefined;
  private readonly handlers = new Map<string, ChannelHandler>();
  private readonly generation: RedisGeneration | undefined;
  private subscriberWasReady = false;
  private recovering: Promise<void> | undefined;
  /** Set when a reconnect happens during a recovery: the recovery starts over once, with the new subscription. */
  private recoverAgain = false;
  private closed = false;
  readonly settings: RedisSettings;

  constructor(private readonly options: RedisBusOptions) {
    this.keys = options.keys;
    this.settings = options.redis ?? { url: options.url };
    this.redis = connectRedis(this.settings, options.connectionName, options.log);
    const timeoutMs = this.settings.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    this.health = new RedisHealth(this.redis, this.keys, { timeoutMs, intervalMs: this.settings.healthCheckMs ?? DEFAULT_HEALTH_CHECK_MS, log: options.log, gauge: options.healthGauge });
    this.writes = new RedisGate(this.redis, { timeoutMs, cooldownMs: 0, health: this.health, waitWhileAway: true });
    // A message heard while only the command connection was down could not be acted on (a handler re-reads through
    // it): a reconnect of either connection re-reads everything.
    let commandsWereReady = false;
    this.redis.on('ready', () => {
      if (commandsWereReady && this.subscriber) this.recover();
      commandsWereReady = true;
    });
    if (options.generationCheckMs !== undefined) {
      this.generation = new RedisGeneration(this.redis, this.keys, {
        intervalMs: options.generationCheckMs,
        log: options.log,
        onLost: () => this.restoreAll(),
      });
    }
  }

  get connectionName(): string {
    return this.options.connectionName;
  }

  /** Where Redis is, without passwords, for messages. */
  get location(): string {
    return describeRedis(this.settings);
  }

  /** Claims (or learns) the generation marker; call once the holders have started listening. */
  async start(): Promise<void> {
    await this.generation?.start();
  }

  /**
   * Subscribes `handler` to `channel` (one handler per channel). Resolves once subscribed: read the state after this,
   * so nothing announced in between is missed (handlers order the two by version or by idempotence).
   */
  async listen(channel: string, handler: ChannelHandler): Promise<void> {
    if (this.handlers.has(channel)) throw new Error(`a handler already listens on ${channel}`);
    this.handlers.set(channel, handler);
    await this.openSubscriber().subscribe(channel);
  }

  /** Runs the generation check now (tests; the bus also runs it on a timer and after every reconnect). */
  checkGeneration(): Promise<boolean> {
    return this.generation?.check() ?? Promise.resolve(true);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.health.close();
    this.generation?.close();
    this.subscriber?.disconnect();
    this.redis.disconnect();
  }

  private openSubscriber(): RedisClient {
    if (this.subscriber) return this.subscriber;
    const subscriber = connectRedis(this.settings, `${this.options.connectionName}:events`, this.options.log);
    subscriber.on('message', (channel: string, text: string) => {
      const handler = this.handlers.get(channel);
      if (!handler) return;
      try {
        handler.message(text);
      } catch (error) {
        this.options.log.warn({ err: error, channel }, 'ignoring a Redis message its handler could not take');
      }
    });
    subscriber.on('ready', () => {
      // The first 'ready' is the first connection: `listen` has its SUBSCRIBE queued and nothing was missed yet.
      if (!this.subscriberWasReady) {
        this.subscriberWasReady = true;
        return;
      }
      this.recover();
    });
    // On a cluster, ioredis moves the subscription to another node by itself when its node leaves (a failover, a
    // resharding) and says nothing: what was published in between is re-read like after any reconnect.
    if (subscriber instanceof Cluster) subscriber.on('-node', () => this.recover());
    this.subscriber = subscriber;
    return subscriber;
  }

  /** Starts a recovery, or marks the running one to go again (it may have read before this reconnect's gap ended). */
  private recover(): void {
    if (this.recovering) {
      this.recoverAgain = true;
      return;
    }
    this.recovering = this.recoverUntilDone().finally(() => {
      this.recovering = undefined;
    });
  }

  private async recoverUntilDone(): Promise<void> {
    for (let attempt = 0; !this.closed; attempt++) {
      this.recoverAgain = false;
      try {
        await this.recoverOnce();
        if (!this.recoverAgain) return;
        attempt = -1;
      } catch (error) {
        this.options.log.warn({ err: error, attempt }, 'could not re-read shared state after a Redis reconnect; retrying');
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, MAX_RECOVERY_DELAY_MS)).unref());
      }
    }
  }

  private async recoverOnce(): Promise<void> {
    const subscriber = this.subscriber!;
    // ioredis's own renewal is off (see connectRedis): one SUBSCRIBE for every channel, before anything is re-read.
    if (this.handlers.size > 0) await subscriber.subscribe(...this.handlers.keys());
    // Redis may have come back empty: holders store again what they hold before anyone re-reads, or a re-read would
    // take the empty Redis for "everything was deleted".
    if (!(await this.checkGeneration())) throw new Error('the generation marker could not be checked');
    for (const handler of this.handlers.values()) await handler.resync();
    this.options.log.info({ connection: this.options.connectionName, channels: this.handlers.size }, 'shared state re-read after a Redis reconnect');
  }

  /** Every holder, in the order they started: static sources before the index pipeline that indexes them. */
  private async restoreAll(): Promise<void> {
    for (const handler of this.handlers.values()) await handler.restore?.();
  }
}
