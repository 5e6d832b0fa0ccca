/** When to try an upstream again after a failure, and the liveness ping while it is connected. */

/**
 * Exponential backoff from `initialMs`, doubling per consecutive failure up to `maxMs`, with jitter (the upper half of
 * the interval) so that many toolrouter instances do not hammer a recovering server in step.
 */
export function backoff(failures: number, { initialMs, maxMs }: { initialMs: number; maxMs: number }, random = Math.random): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(Math.max(failures - 1, 0), 30));
  return ceiling / 2 + (random() * ceiling) / 2;
}

export interface ReconnectionOptions {
  reconnect: { initialMs: number; maxMs: number };
  /** 0 turns the liveness ping off. */
  pingIntervalMs: number;
}

/** The retry and ping timers of one upstream connection, and its count of consecutive failures. */
export class Reconnection {
  failures = 0;
  /** While down: when the next attempt is due (epoch ms). */
  retryAt: number | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ReconnectionOptions) {}

  /** A failed attempt or a lost connection: `retry` runs after the backoff for this many failures. Returns the delay. */
  failed(retry: () => void): number {
    this.failures++;
    clearTimeout(this.pingTimer);
    clearTimeout(this.retryTimer);
    const delay = backoff(this.failures, this.options.reconnect);
    this.retryAt = Date.now() + delay;
    this.retryTimer = setTimeout(retry, delay);
    this.retryTimer.unref();
    return delay;
  }

  succeeded(): void {
    this.failures = 0;
    this.retryAt = undefined;
    clearTimeout(this.retryTimer);
  }

  /** Seconds until the next attempt, at least 1 (REST Retry-After). */
  retryAfterSeconds(): number {
    return this.retryAt === undefined ? 1 : Math.max(1, Math.ceil((this.retryAt - Date.now()) / 1000));
  }

  /** Pings every pingIntervalMs while `ping` answers true (the connection is still the one pinged). */
  keepAlive(ping: () => Promise<boolean>): void {
    if (this.options.pingIntervalMs <= 0) return;
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(async () => {
      if (await ping()) this.keepAlive(ping);
    }, this.options.pingIntervalMs);
    this.pingTimer.unref();
  }

  stop(): void {
    clearTimeout(this.retryTimer);
    clearTimeout(this.pingTimer);
    this.retryAt = undefined;
  }
}
