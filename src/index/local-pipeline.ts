import type { CatalogSnapshot } from '../catalog/catalog.js';
import type { IndexManager, IndexPipeline } from './manager.js';
import type { SearchIndex } from './search-index.js';

/** Turns a catalog snapshot into a search index. */
export interface IndexBuilder {
  build(snapshot: CatalogSnapshot): Promise<SearchIndex>;
  /** Releases what the builder holds (a build thread); called once no build runs. */
  close?(): Promise<void>;
}

/**
 * The in-process pipeline, used when no Redis is configured. Builds run one at a time; when the catalog changes
 * during a build, only its newest snapshot is built next (intermediate ones are skipped).
 */
export class LocalIndexPipeline implements IndexPipeline {
  private building: Promise<void> | undefined;
  private version = 0;
  private forced = false;

  constructor(
    private readonly manager: IndexManager,
    private readonly builder: IndexBuilder,
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
        this.manager.recordFailure(snapshot.catalogHash, error instanceof Error ? error : new Error(String(error)));
      }
      if (this.manager.target.catalogHash === snapshot.catalogHash && version === this.version) return;
    }
  }
}
