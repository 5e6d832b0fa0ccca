import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { RedisKeys } from '../redis.js';

/** A limit was hit; the caller may retry after `retryAfterMs`. */
export class RateLimitedError extends Error {
  override readonly name = 'RateLimitedError';
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

export type LimitKind = 'ip' | 'key' | 'auth-failure';

/**
 * Fixed one-minute windows per (kind, id). With Redis the counters are shared by every instance, so scaling out does not
 * multiply a key's allowance; if Redis goes away, each instance falls back to counting in its own memory rather than
 * letting everything through or refusing everything.
 */
export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterAbstract>();

  constructor(private readonly redis?: { client: Redis; keys: RedisKeys }) {}

  /** Counts one request; throws RateLimitedError once `perMinute` is exceeded within the window. */
  async consume(kind: LimitKind, id: string, perMinute: number): Promise<void> {
    try {
      await this.limiter(kind, perMinute).consume(id);
    } catch (error) {
      if (error instanceof RateLimiterRes) {
        throw new RateLimitedError(`rate limit of ${perMinute} requests per minute exceeded (${describe(kind)}); retry later`, error.msBeforeNext);
      }
      throw error;
    }
  }

  /** Throws RateLimitedError if `id` has already used up `perMinute`, without counting this request. */
  async check(kind: LimitKind, id: string, perMinute: number): Promise<void> {
    const state = await this.limiter(kind, perMinute).get(id);
    if (state && state.consumedPoints >= perMinute) {
      throw new RateLimitedError(`too many requests (${describe(kind)}); retry later`, state.msBeforeNext);
    }
  }

  private limiter(kind: LimitKind, perMinute: number): RateLimiterAbstract {
    // Keys carry their own limits: one limiter per distinct limit, each with its own counters.
    const name = `${kind}:${perMinute}`;
    let limiter = this.limiters.get(name);
    if (!limiter) {
      const options = { points: perMinute, duration: 60, keyPrefix: name };
      const memory = new RateLimiterMemory(options);
      limiter = this.redis
        ? new RateLimiterRedis({ ...options, keyPrefix: `${this.redis.keys.rateLimit(kind)}:${perMinute}`, storeClient: this.redis.client, insuranceLimiter: memory })
        : memory;
      this.limiters.set(name, limiter);
    }
    return limiter;
  }
}

function describe(kind: LimitKind): string {
  if (kind === 'ip') return 'per client address';
  if (kind === 'key') return 'per key';
  return 'failed authentication attempts per client address';
}
