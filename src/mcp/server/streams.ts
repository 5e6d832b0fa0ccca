import type { Response } from 'express';
import type { Metrics } from '../../metrics.js';

/**
 * Long-lived responses held open on /mcp: 2026-07-28 `subscriptions/listen` streams and 2025 GET event streams. Each
 * holds a socket and a file descriptor for as long as the client likes, so they are capped like sessions are: per
 * holder (a key; on an open service a client address), so one caller's flood fills only its own allowance, and in
 * total, where the admin's do not count (others cannot lock the admin out).
 */
export type StreamKind = 'listen' | 'sse';

export interface StreamCaps {
  perKey: number;
  total: number;
}

export class StreamLimits {
  private readonly held = new Map<string, number>();
  /** Open streams of callers other than the admin. */
  private counted = 0;

  constructor(
    private readonly caps: StreamCaps,
    private readonly metrics?: Metrics,
  ) {}

  /**
   * Counts a stream against `holder` until `res` closes. Returns why it may not be opened instead (the caller answers
   * 429 with it), counting the refusal.
   */
  open(kind: StreamKind, holder: string, admin: boolean, res: Response): string | undefined {
    const mine = this.held.get(holder) ?? 0;
    if (mine >= this.caps.perKey) {
      this.metrics?.mcpStreamsRefused.inc({ kind, limit: 'key' });
      return `Too many open MCP streams for this key (${this.caps.perKey}, mcp.maxStreamsPerKey); close some or retry later`;
    }
    if (!admin && this.counted >= this.caps.total) {
      this.metrics?.mcpStreamsRefused.inc({ kind, limit: 'total' });
      return `Too many open MCP streams (${this.caps.total}, mcp.maxStreams); retry later`;
    }
    this.held.set(holder, mine + 1);
    if (!admin) this.counted++;
    this.metrics?.mcpStreams.inc({ kind });
    res.once('close', () => {
      const left = this.held.get(holder)! - 1;
      if (left > 0) this.held.set(holder, left);
      else this.held.delete(holder);
      if (!admin) this.counted--;
      this.metrics?.mcpStreams.dec({ kind });
    });
    return undefined;
  }

  /** Open streams of one holder (tests, diagnostics). */
  of(holder: string): number {
    return this.held.get(holder) ?? 0;
  }
}
