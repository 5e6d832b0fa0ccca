import { EventEmitter } from 'node:events';
import type { CatalogSnapshot } from '../catalog/catalog.js';
import type { SearchIndex } from './search-index.js';

export type IndexState = 'ready' | 'building' | 'empty' | 'failed';

export interface IndexStatus {
  state: IndexState;
  catalogHash: string;
  indexedHash: string | null;
  model: string | null;
  tools: number;
  builtAt: string | null;
  lastError?: string;
}

/** Turns a catalog snapshot into a search index: in this process, or through a queue and a worker. */
export interface IndexBuilder {
  build(snapshot: CatalogSnapshot): Promise<SearchIndex>;
}

export interface IndexManagerEvents {
  swapped: [SearchIndex];
  failed: [Error, string];
}

/**
 * Keeps one live index and rebuilds it when the catalog changes. Searches read `current` and never wait: while a build
 * runs they are served by the previous index, and a failed build leaves it in place. Builds run one at a time; when
 * the catalog changes during a build, only its newest snapshot is built next, and an index is never replaced by one
 * built from an older snapshot.
 */
export class IndexManager extends EventEmitter<IndexManagerEvents> {
  private live: SearchIndex | undefined;
  private latest: CatalogSnapshot;
  private building: Promise<void> | undefined;
  private failure: { catalogHash: string; message: string } | undefined;
  private generation = 0;
  private swappedGeneration = -1;

  constructor(
    private readonly builder: IndexBuilder,
    initial: CatalogSnapshot,
  ) {
    super();
    this.latest = initial;
  }

  get current(): SearchIndex | undefined {
    return this.live;
  }

  /** Schedules a build of this snapshot (the newest wins) and resolves when the index has caught up or failed. */
  update(snapshot: CatalogSnapshot): Promise<void> {
    this.latest = snapshot;
    this.generation++;
    return this.drain();
  }

  /** Rebuilds the current snapshot even when an index for it exists (after a model change, or on request). */
  rebuild(): Promise<void> {
    this.generation++;
    this.failure = undefined;
    return this.drain(true);
  }

  /** Installs an index built elsewhere (another worker, a stored artifact) if it is not older than the live one. */
  install(index: SearchIndex, generation = this.generation): boolean {
    if (generation < this.swappedGeneration) return false;
    this.live = index;
    this.swappedGeneration = generation;
    if (this.failure?.catalogHash === index.catalogHash) this.failure = undefined;
    this.emit('swapped', index);
    return true;
  }

  /** Resolves once no build is running or pending. */
  async idle(): Promise<void> {
    while (this.building) await this.building;
  }

  status(): IndexStatus {
    const live = this.live;
    const upToDate = live?.catalogHash === this.latest.catalogHash;
    const failedNow = this.failure?.catalogHash === this.latest.catalogHash;
    const state: IndexState = this.building
      ? 'building'
      : failedNow
        ? 'failed'
        : upToDate
          ? 'ready'
          : live
            ? 'building'
            : 'empty';
    return {
      state,
      catalogHash: this.latest.catalogHash,
      indexedHash: live?.catalogHash ?? null,
      model: live?.model ?? null,
      tools: live?.size ?? 0,
      builtAt: live?.builtAt ?? null,
      ...(this.failure ? { lastError: this.failure.message } : {}),
    };
  }

  private drain(force = false): Promise<void> {
    this.building ??= this.runBuilds(force).finally(() => {
      this.building = undefined;
    });
    return this.building;
  }

  private async runBuilds(force: boolean): Promise<void> {
    let forced = force;
    for (;;) {
      const snapshot = this.latest;
      const generation = this.generation;
      const current = !forced && this.live?.catalogHash === snapshot.catalogHash;
      const alreadyFailed = this.failure?.catalogHash === snapshot.catalogHash;
      if (current || (alreadyFailed && !forced)) return;
      forced = false;
      try {
        const index = await this.builder.build(snapshot);
        this.install(index, generation);
        this.failure = undefined;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        this.failure = { catalogHash: snapshot.catalogHash, message };
        this.emit('failed', error instanceof Error ? error : new Error(message), snapshot.catalogHash);
      }
      if (this.latest.catalogHash === snapshot.catalogHash && generation === this.generation) return;
    }
  }
}
