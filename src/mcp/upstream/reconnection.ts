/** When to try an upstream again after a failure, and the liveness ping while it is connected. */

/**
 * Exponential backoff from `initialMs`, doubling per consecutive failure up to `maxMs`, with jitter (the upper half of
 * the interval) so that many toolrouter instances do not hammer a recovering server in step.
 */
export function backoff(failures: number, { initialMs, maxMs }: { initialMs: number; maxMs: number }, random = Math.random): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(Math.max(failures - 1, 0), 30));
  return ceiling / 2 + (random() * ceiling) / 2;
}

/** What a failed connection tells about itself, for `needsPerson`. */
export interface FailureFacts {
  /** Why the attempt failed, as logged (a transport or spawn error, the OAuth side's message). */
  reason: string;
  /** The OAuth side's verdict, when the server uses OAuth and waits for the admin. */
  authorization?: { reason: string; message: string };
  /** The OAuth side refuses to run at all (no TOOLROUTER_SECRET_KEY where tokens must be encrypted). */
  refusal?: string;
}

/**
 * What a person must do before a connection can succeed, or undefined when retrying may succeed by itself. Retrying
 * these only repeats the same failure and its log lines: no grant yet or a revoked one (the admin authorizes; the grant
 * reaches every instance through the OAuth channel), no secret key (set it and restart), a command that does not exist
 * or may not run (fix the configuration; reconnect). A refresh that failed may have failed for a passing reason, so it
 * is retried.
 */
export function needsPerson(facts: FailureFacts): string | undefined {
  if (facts.refusal) return facts.refusal;
  if (facts.authorization && facts.authorization.reason !== 'refresh_failed') {
    return `authorization by an admin (POST /v1/mcp/servers/:name/authorize): ${facts.authorization.message}`;
  }
  if (/\bspawn\b.*\b(ENOENT|EACCES)\b/.test(facts.reason)) return `a configuration fix (the command cannot be run: ${facts.reason}), then a reconnect`;
  return undefined;
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

  /**
   * A failure only a person can cure (needsPerson): no retry is scheduled; `reconnectNow`/`reconnect` (a grant
   * arriving, the admin) or a restart start again. Counted as a failure, so status shows the streak.
   */
  park(): void {
    this.failures++;
    this.stop();
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
