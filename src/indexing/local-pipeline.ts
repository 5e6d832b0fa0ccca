import type { CatalogSnapshot } from '../catalog/catalog.js';
import type { IndexManager, IndexPipeline } from './manager.js';
import type { SearchIndex } from './search-index.js';

/** Turns a catalog snapshot into a search index. */
export interface IndexBuilder {
  build(snapshot: CatalogSnapshot): Promise<SearchIndex>;
  /** Releases what the builder holds (a build thread); called once no build runs. */
  close?(): Promise<void>;
}

/** How a failed build is tried again: the same settings as the Redis pipeline's jobs (queue.attempts, queue.backoffMs). */
export interface BuildRetry {
  /** Tries per catalog, the first included; 1: a failure stands until the catalog changes or a rebuild is asked for. */
  attempts: number;
  /** Wait before the second try; doubled for each one after. */
  backoffMs: number;
}

/**
 * The in-process pipeline, used when no Redis is configured. Builds run one at a time; when the catalog changes
 * during a build, only its newest snapshot is built next (intermediate ones are skipped). A failed build (an embeddings
 * server down) is tried again after a backoff while the last good index keeps serving.
 */
export class LocalIndexPipeline implements IndexPipeline {
  private building: Promise<void> | undefined;
  private version = 0;
  private forced = false;
  private closed = false;
  /** Failed tries of the catalog the retry timer is for. */
  private failures = { catalogHash: '', count: 0 };
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly manager: IndexManager,
    private readonly builder: IndexBuilder,
    private readonly retry: BuildRetry = { attempts: 1, backoffMs: 0 },
  ) {}

  update(snapshot: CatalogSnapshot): Promise<void> {
    this.manager.setTarget(snapshot);
    this.version++;
    return this.drain();
  }

  rebuild(): Promise<void> {
    this.forced = true;
    this.version++;
    this.manager.clearFailure();
    return this.drain();
  }

  async idle(): Promise<void> {
    while (this.building) await this.building;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    // The builder first: it may end a build in flight, which idle() would otherwise wait out.
    await this.builder.close?.();
    await this.idle();
  }

  private drain(): Promise<void> {
    this.building ??= this.manager.track(this.runBuilds()).finally(() => {
      this.building = undefined;
    });
    return this.building;
  }

  private async runBuilds(): Promise<void> {
    for (;;) {
      const snapshot = this.manager.target;
      const version = this.version;
      const current = !this.forced && this.manager.current?.catalogHash === snapshot.catalogHash;
      if (current || (!this.forced && this.manager.failedFor(snapshot.catalogHash))) return;
      this.forced = false;
      try {
        this.manager.install(await this.builder.build(snapshot), version);
      } catch (error) {
        this.failed(snapshot, error instanceof Error ? error : new Error(String(error)));
      }
      if (this.manager.target.catalogHash === snapshot.catalogHash && version === this.version) return;
    }
  }

  /** Shown as the last error while tries remain (the state stays "building"); recorded as the failure after the last. */
  private failed(snapshot: CatalogSnapshot, error: Error): void {
    // Closing abandons the build in flight (the builder ends it at its next checkpoint): that is the close, not a failed
    // build, and a stdio client's normal exit must not log an error.
    if (this.closed) return;
    if (this.failures.catalogHash !== snapshot.catalogHash) this.failures = { catalogHash: snapshot.catalogHash, count: 0 };
    const tries = ++this.failures.count;
    if (tries >= this.retry.attempts) {
      this.manager.recordFailure(snapshot.catalogHash, error);
      return;
    }
    this.manager.reportError(`${error.message} (try ${tries} of ${this.retry.attempts}; trying again)`);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      // A newer catalog has its own build already; this retry is only for the catalog that failed.
      if (!this.closed && this.manager.target.catalogHash === snapshot.catalogHash) {
        this.forced = true;
        void this.drain();
      }
    }, this.retry.backoffMs * 2 ** (tries - 1));
    this.retryTimer.unref();
  }
}
