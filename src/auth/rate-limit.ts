import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RedisUnavailableError, type RedisGate, type RedisKeys } from '../redis/connection.js';
import { ToolrouterError } from '../errors.js';

/** A limit was hit; the caller may retry after `retryAfterMs`. */
export class RateLimitedError extends ToolrouterError {
  override readonly name = 'RateLimitedError';
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super('rate_limited', message, { retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)) });
  }
}

export type LimitKind = 'ip' | 'key' | 'auth-failure';

/**
 * Fixed one-minute windows per (kind, id). With Redis the counters are shared by every instance, so scaling out does not
 * multiply a key's allowance; while Redis is away (connection down, or a command failed or timed out recently: see
 * RedisGate), each instance counts in its own memory at once rather than waiting on Redis, letting everything through
 * or refusing everything.
 */
export class RateLimits {
  private readonly limiters = new Map<string, { memory: RateLimiterMemory; shared?: RateLimiterRedis }>();

  constructor(private readonly redis?: { gate: RedisGate; keys: RedisKeys }) {}

  /** Counts one request; throws RateLimitedError once `perMinute` is exceeded within the window. */
  async consume(kind: LimitKind, id: string, perMinute: number): Promise<void> {
    try {
      await this.use(kind, perMinute, (limiter) => limiter.consume(id));
    } catch (error) {
      if (error instanceof RateLimiterRes) {
        throw new RateLimitedError(`rate limit of ${perMinute} requests per minute exceeded (${describe(kind)}); retry later`, error.msBeforeNext);
      }
      throw error;
    }
  }

  /** Throws RateLimitedError if `id` has already used up `perMinute`, without counting this request. */
  async check(kind: LimitKind, id: string, perMinute: number): Promise<void> {
    const state = await this.use(kind, perMinute, (limiter) => limiter.get(id));
    if (state && state.consumedPoints >= perMinute) {
      throw new RateLimitedError(`too many requests (${describe(kind)}); retry later`, state.msBeforeNext);
    }
  }

  /** The shared counter when Redis answers in time, else this instance's own. A limit hit (RateLimiterRes) passes through. */
  private async use<T>(kind: LimitKind, perMinute: number, operation: (limiter: RateLimiterAbstract) => Promise<T>): Promise<T> {
    const { memory, shared } = this.limiter(kind, perMinute);
    if (!shared || !this.redis!.gate.available) return operation(memory);
    let outcome: { value: T } | { limited: RateLimiterRes };
    try {
      // A limit hit is an answer from Redis, not a failure of it: it must not trip the gate.
      outcome = await this.redis!.gate.run('counting the request', () =>
        operation(shared).then(
          (value) => ({ value }),
          (error: unknown) => {
            if (error instanceof RateLimiterRes) return { limited: error };
            throw error;
          },
        ),
      );
    } catch (error) {
      if (!(error instanceof RedisUnavailableError)) throw error;
      return operation(memory);
    }
    if ('limited' in outcome) throw outcome.limited;
    return outcome.value;
  }

  private limiter(kind: LimitKind, perMinute: number): { memory: RateLimiterMemory; shared?: RateLimiterRedis } {
    // Keys carry their own limits: one limiter per distinct limit, each with its own counters.
    const name = `${kind}:${perMinute}`;
    let limiter = this.limiters.get(name);
    if (!limiter) {
      const options = { points: perMinute, duration: 60, keyPrefix: name };
      const memory = new RateLimiterMemory(options);
      limiter = this.redis
        ? {
            memory,
            shared: new RateLimiterRedis({ ...options, keyPrefix: `${this.redis.keys.rateLimit(kind)}:${perMinute}`, storeClient: this.redis.gate.redis }),
          }
        : { memory };
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
