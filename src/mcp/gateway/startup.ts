import type { Catalog } from '../../catalog/catalog.js';
import type { IndexManager } from '../../indexing/manager.js';
import type { UpstreamManager } from '../upstream/index.js';

/** Upstream servers an answer is missing, by state. */
export interface UpstreamNotes {
  connecting: string[];
  down: string[];
}

/**
 * The start-up wait. Upstreams connect in the background, and their tools reach search only once the index has been
 * rebuilt with them; a client that lists once at start would otherwise see an empty gateway. The first listings and
 * searches wait for both, bounded by `waitMs` from start; once over (done or timed out), nothing waits again.
 */
export class StartupGate {
  private readonly finished: Promise<void>;
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly upstreams: UpstreamManager,
    private readonly catalog: Catalog,
    private readonly indexes: IndexManager | undefined,
    waitMs: number,
  ) {
    const timedOut = new Promise<void>((resolve) => {
      this.timer = setTimeout(resolve, waitMs);
      this.timer.unref();
    });
    this.finished = Promise.race([this.upToDate(), timedOut]).finally(() => {
      clearTimeout(this.timer);
      // Stops the index watch below if the time ran out first.
      this.abort.abort();
    });
  }

  wait(): Promise<void> {
    return this.finished;
  }

  /** Upstreams (of those `visible`) that are not connected now; undefined when all are. */
  notes(visible: (server: string) => boolean): UpstreamNotes | undefined {
    const notes: UpstreamNotes = { connecting: [], down: [] };
    for (const status of this.upstreams.status()) {
      if (!visible(status.name)) continue;
      if (status.state === 'connecting') notes.connecting.push(status.name);
      // A server waiting for OAuth authorization is missing from answers just as a down one is.
      else if (status.state === 'down' || status.state === 'needs_authorization') notes.down.push(status.name);
    }
    return notes.connecting.length + notes.down.length > 0 ? notes : undefined;
  }

  close(): void {
    clearTimeout(this.timer);
    this.abort.abort();
  }

  private async upToDate(): Promise<void> {
    await this.upstreams.settled();
    const indexes = this.indexes;
    if (!indexes) return;
    // Woken by every swap or failed build (the catalog does not change without a build following), or by the end of
    // the wait; the listeners go either way.
    const nextBuild = () =>
      new Promise<void>((resolve) => {
        const done = () => {
          indexes.off('swapped', done);
          indexes.off('failed', done);
          this.abort.signal.removeEventListener('abort', done);
          resolve();
        };
        indexes.on('swapped', done);
        indexes.on('failed', done);
        this.abort.signal.addEventListener('abort', done);
      });
    while (!this.indexCovers() && !this.abort.signal.aborted) await nextBuild();
  }

  /** Whether searches are served from (or have given up on) an index of the catalog as it is now. */
  private indexCovers(): boolean {
    const { catalogHash, entries } = this.catalog.snapshot();
    const indexes = this.indexes;
    return !indexes || entries.length === 0 || indexes.current?.catalogHash === catalogHash || indexes.failedFor(catalogHash);
  }
}
