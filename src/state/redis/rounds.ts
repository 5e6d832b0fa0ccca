/**
 * The requestState secret shared through Redis (why a generated one: src/state/rounds.ts). The first instance writes
 * a random secret with `SET NX`; every instance reads what is there. It expires (every Redis value does) and each
 * instance renews it while it runs, writing its own copy back if Redis lost it, so running instances keep agreeing.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { RedisClient, RedisKeys } from '../../redis/connection.js';
import type { RoundSecrets } from '../rounds.js';

export interface RedisRoundSecretsOptions {
  /**
   * How long the secret lives in Redis without an instance renewing it.
   * @defaultValue 7 days
   */
  ttlMs?: number;
  /**
   * How often a running instance renews it (and re-reads it).
   * @defaultValue 60000
   */
  renewMs?: number;
  log: Logger;
}

export class RedisRoundSecrets implements RoundSecrets {
  private secret: Buffer;
  private timer: NodeJS.Timeout | undefined;
  private refreshedAt = 0;

  private constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly ttlMs: number,
  ) {
    this.secret = randomBytes(32);
  }

  static async start(redis: RedisClient, keys: RedisKeys, options: RedisRoundSecretsOptions): Promise<RedisRoundSecrets> {
    const secrets = new RedisRoundSecrets(redis, keys, options.ttlMs ?? 7 * 24 * 3600_000);
    await secrets.refresh();
    secrets.timer = setInterval(() => {
      secrets.refresh().catch((error: unknown) => options.log.warn({ err: error }, 'requestState secret not renewed in Redis'));
    }, options.renewMs ?? 60_000);
    secrets.timer.unref();
    return secrets;
  }

  current(): Buffer {
    return this.secret;
  }

  async refresh(): Promise<Buffer> {
    // A forged requestState asks for a re-read too: at most one round trip per second, whoever asks.
    if (Date.now() - this.refreshedAt < 1_000) return this.secret;
    this.refreshedAt = Date.now();
    const key = this.keys.roundsSecret;
    // Ours only when none is there (first instance, or Redis lost it); then whatever is there wins, for everyone.
    await this.redis.set(key, this.secret.toString('base64'), 'PX', this.ttlMs, 'NX');
    const stored = await this.redis.get(key);
    await this.redis.pexpire(key, this.ttlMs);
    if (stored) this.secret = Buffer.from(stored, 'base64');
    return this.secret;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
  }
}
