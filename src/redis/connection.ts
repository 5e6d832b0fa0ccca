import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ToolrouterError } from '../errors.js';

/**
 * Every Redis key and channel toolrouter uses, under one prefix so several deployments (or test runs) can share a
 * Redis without seeing each other.
 */
export class RedisKeys {
  constructor(readonly prefix: string) {}

  /** BullMQ queue of index builds (BullMQ adds its own `bull:` prefix, so the name carries ours). */
  get indexQueue(): string {
    return `${this.prefix}-index`;
  }
  catalogSnapshot(catalogHash: string): string {
    return `${this.prefix}:catalog:${catalogHash}`;
  }
  /** Sorted set of stored snapshots (catalog hash by version), for retention. */
  get catalogSnapshots(): string {
    return `${this.prefix}:catalog:snapshots`;
  }
  /** Sorted set of promoted index artifacts of a model (catalog hash by version), for retention. */
  artifacts(model: string): string {
    return `${this.prefix}:index:${model}:artifacts`;
  }
  /**
   * A random id written once into an empty Redis: when it disappears or changes, Redis lost its data (restarted without
   * persistence, flushed) and every instance re-announces what it holds.
   */
  get generation(): string {
    return `${this.prefix}:generation`;
  }
  /** Counter giving every published catalog snapshot a version, across all API instances. */
  get catalogVersion(): string {
    return `${this.prefix}:catalog:version`;
  }
  /** `{hash, version}` of the newest snapshot any instance asked to index. */
  get catalogLatest(): string {
    return `${this.prefix}:catalog:latest`;
  }
  artifact(model: string, catalogHash: string): string {
    return `${this.prefix}:index:${model}:${catalogHash}`;
  }
  /** `{hash, version, builtAt}` of the index every instance should serve for this model. */
  indexPointer(model: string): string {
    return `${this.prefix}:index:${model}:current`;
  }
  indexChannel(model: string): string {
    return `${this.prefix}:index:${model}:events`;
  }
  embedding(model: string, textHash: string): string {
    return `${this.prefix}:emb:${model}:${textHash}`;
  }
  /** Virtual API keys: secret hash → key record. */
  get apiKeys(): string {
    return `${this.prefix}:keys`;
  }
  /** Prefix of rate-limit counters (rate-limiter-flexible adds the limited key after it). */
  rateLimit(kind: string): string {
    return `${this.prefix}:ratelimit:${kind}`;
  }
  get staticSources(): string {
    return `${this.prefix}:sources`;
  }
  get staticSourcesChannel(): string {
    return `${this.prefix}:sources:events`;
  }
  /** Feedback events (src/feedback): a sorted set scored by time, and the channel announcing each append. */
  get feedbackEvents(): string {
    return `${this.prefix}:feedback:events`;
  }
  get feedbackChannel(): string {
    return `${this.prefix}:feedback:channel`;
  }
  /** Search defaults applied at run time (`PUT /v1/search/settings`), shared by every API instance. */
  get searchSettings(): string {
    return `${this.prefix}:search:settings`;
  }
  /** Counter ordering applied search defaults, so an instance never goes back to an older one. */
  get searchSettingsVersion(): string {
    return `${this.prefix}:search:settings:version`;
  }
  get searchSettingsChannel(): string {
    return `${this.prefix}:search:settings:events`;
  }
  /** An upstream MCP server's OAuth record (client registration, tokens), sealed with TOOLROUTER_SECRET_KEY. */
  oauthServer(server: string): string {
    return `${this.prefix}:oauth:server:${server}`;
  }
  /** An authorization in progress (PKCE verifier), by its `state`; expires with the browser step's deadline. */
  oauthPending(state: string): string {
    return `${this.prefix}:oauth:pending:${state}`;
  }
  /** Held by the instance refreshing a server's tokens (see src/mcp/oauth/store.ts). */
  oauthLock(server: string): string {
    return `${this.prefix}:oauth:lock:${server}`;
  }
  /** Announces that a server's OAuth record changed (authorized, refreshed, revoked). */
  get oauthChannel(): string {
    return `${this.prefix}:oauth:events`;
  }
}

/** Redis could not be reached: the request failed, and nothing was changed. */
export class RedisUnavailableError extends ToolrouterError {
  override readonly name = 'RedisUnavailableError';

  constructor(action: string, cause: unknown) {
    super('redis_unavailable', `Redis is unavailable, so ${action} failed and nothing was changed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** Runs a Redis command, turning connection failures into RedisUnavailableError. */
export async function withRedis<T>(action: string, command: () => Promise<T>): Promise<T> {
  try {
    return await command();
  } catch (error) {
    throw new RedisUnavailableError(action, error);
  }
}

/**
 * Guards commands on a request's path (key lookups, rate counters) so a Redis outage costs a request at most one
 * timeout, not ioredis's reconnect retries (about 14 s each while Redis is down): while the connection is not ready, or
 * for `cooldownMs` after a command failed or timed out, commands are refused at once and callers use their in-memory
 * fallbacks.
 */
export class RedisGate {
  private openUntil = 0;

  constructor(
    readonly redis: Redis,
    private readonly options: { timeoutMs: number; cooldownMs: number },
  ) {}

  /** False while the connection is down or recently failed: callers should not even try. */
  get available(): boolean {
    return this.redis.status === 'ready' && Date.now() >= this.openUntil;
  }

  /** Runs a command within the timeout; throws RedisUnavailableError at once when Redis is known to be away. */
  async run<T>(action: string, command: (redis: Redis) => Promise<T>): Promise<T> {
    if (!this.available) throw new RedisUnavailableError(action, new Error(`connection ${this.redis.status}`));
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        command(this.redis),
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${this.options.timeoutMs} ms`)), this.options.timeoutMs);
        }),
      ]);
    } catch (error) {
      this.openUntil = Date.now() + this.options.cooldownMs;
      throw new RedisUnavailableError(action, error);
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * A Redis connection that fails commands fast while Redis is away (instead of queueing them forever) and keeps
 * reconnecting in the background, so a request during an outage gets an error, not a hang.
 */
export function connectRedis(url: string, name: string, log?: Logger): Redis {
  const redis = new Redis(url, {
    connectionName: name,
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    // Subscriptions are renewed by RedisBus (src/redis/bus.ts), which also re-reads what was missed: ioredis's own
    // renewal leaves its promise unhandled, and a connection closed at that moment (Redis restarting while an instance
    // shuts down) would crash the process.
    autoResubscribe: false,
    retryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 5_000),
  });
  // Without a listener ioredis prints every failed reconnect; one line per outage is enough.
  let down = false;
  redis.on('error', (error) => {
    if (!down) log?.warn({ err: error, connection: name }, 'Redis connection lost; reconnecting');
    down = true;
  });
  redis.on('ready', () => {
    if (down) log?.info({ connection: name }, 'Redis connection restored');
    down = false;
  });
  return redis;
}
