import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { RedisClient, RedisKeys } from './connection.js';

/**
 * Notices when Redis lost this deployment's data (restarted without persistence, flushed, failed over to an empty
 * replica): a random generation id is written once into an empty Redis; when an instance finds it gone or replaced, the
 * data it relied on is gone too, and the holders (static sources, search settings, the index pipeline) store again what
 * they hold. Checked every `intervalMs`, at once after every reconnect, and by RedisBus before any re-read.
 */
export class RedisGeneration {
  private known: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<boolean> | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly options: { intervalMs: number; log: Logger; onLost: () => Promise<void> },
  ) {}

  async start(): Promise<void> {
    this.known = await this.claim();
    this.redis.on('ready', this.onReady);
    this.timer = setInterval(() => void this.check(), this.options.intervalMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
    this.redis.off('ready', this.onReady);
  }

  /**
   * Compares the stored generation with the one this instance knows; re-announces on a change. Never throws: false when
   * the marker could not be read or the re-announcement failed (the next check tries again).
   */
  check(): Promise<boolean> {
    this.checking ??= this.compare().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private readonly onReady = () => void this.check();

  private async compare(): Promise<boolean> {
    try {
      if (this.redis.status !== 'ready') return false;
      const current = await this.claim();
      if (current === this.known) return true;
      this.options.log.warn({ was: this.known, now: current }, 'Redis lost its data (generation marker gone or replaced); re-announcing this instance\'s sources and index');
      await this.options.onLost();
      // Adopted only once re-announced: a failure here is retried on the next check.
      this.known = current;
      return true;
    } catch (error) {
      this.options.log.warn({ err: error }, 'could not check the Redis generation marker; retrying');
      return false;
    }
  }

  /** The stored generation, writing a new one first if Redis has none. */
  private async claim(): Promise<string> {
    await this.redis.set(this.keys.generation, randomUUID(), 'NX');
    return (await this.redis.get(this.keys.generation)) ?? '';
  }
}
