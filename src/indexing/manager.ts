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

export interface IndexManagerEvents {
  swapped: [SearchIndex];
  failed: [Error, string];
}

/**
 * Holds the live index that searches read, and what is known about builds. Swaps are atomic (one reference) and
 * ordered: every index comes with the version of the catalog snapshot it was built from, and one older than the live
 * index is refused, so a slow build of a stale catalog never replaces a newer index. Who builds, and where, is the
 * pipeline's business (in this process, or a queue worker).
 */
export class IndexManager extends EventEmitter<IndexManagerEvents> {
  private live: SearchIndex | undefined;
  private liveVersion = -Infinity;
  private latest: CatalogSnapshot;
  private pending = 0;
  private failure: { catalogHash: string; message: string } | undefined;
  private lastError: string | undefined;

  constructor(initial: CatalogSnapshot) {
    super();
    this.latest = initial;
  }

  get current(): SearchIndex | undefined {
    return this.live;
  }

  /** Catalog version of the live index (-Infinity before the first). */
  get version(): number {
    return this.liveVersion;
  }

  /** The snapshot searches should eventually be served from. */
  get target(): CatalogSnapshot {
    return this.latest;
  }

  setTarget(snapshot: CatalogSnapshot): void {
    this.latest = snapshot;
  }

  /** Installs an index unless the live one comes from a newer catalog version. */
  install(index: SearchIndex, version: number): boolean {
    if (version < this.liveVersion) return false;
    this.live = index;
    this.liveVersion = version;
    if (this.failure?.catalogHash === index.catalogHash) this.failure = undefined;
    if (index.catalogHash === this.latest.catalogHash) this.lastError = undefined;
    this.emit('swapped', index);
    return true;
  }

  /** Brackets a build so status shows `building` while any runs. */
  async track<T>(work: Promise<T>): Promise<T> {
    this.pending++;
    try {
      return await work;
    } finally {
      this.pending--;
    }
  }

  recordFailure(catalogHash: string, error: Error): void {
    this.failure = { catalogHash, message: error.message };
    this.lastError = error.message;
    this.emit('failed', error, catalogHash);
  }

  /** An error worth showing (a build attempt that will be retried) that does not make the index failed. */
  reportError(message: string): void {
    this.lastError = message;
  }

  clearFailure(): void {
    this.failure = undefined;
    this.lastError = undefined;
  }

  failedFor(catalogHash: string): boolean {
    return this.failure?.catalogHash === catalogHash;
  }

  status(): IndexStatus {
    const live = this.live;
    const upToDate = live?.catalogHash === this.latest.catalogHash;
    const state: IndexState = this.failedFor(this.latest.catalogHash)
      ? 'failed'
      : upToDate
        ? 'ready'
        : this.pending > 0 || live
          ? 'building'
          : 'empty';
    return {
      state,
      catalogHash: this.latest.catalogHash,
      indexedHash: live?.catalogHash ?? null,
      model: live?.model ?? null,
      tools: live?.size ?? 0,
      builtAt: live?.builtAt ?? null,
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
    };
  }
}

/** Keeps the live index following the catalog: in this process, or through a queue and workers. */
export interface IndexPipeline {
  /** A new catalog snapshot to index; resolves when this process has done its part (not necessarily swapped). */
  update(snapshot: CatalogSnapshot): Promise<void>;
  /** Redis lost its data (shared pipeline only): asks again for the index of the current catalog. */
  resync?(): Promise<void>;
  /** Why the current catalog's index is not live yet (shared pipeline only), for the status route. */
  buildWait?(): Promise<{ job: string; reason: string; retryAt?: string } | undefined>;
  /** Rebuilds the current snapshot even when an index for it exists. */
  rebuild(): Promise<void>;
  /** Resolves once no build started by this process is running or pending. */
  idle(): Promise<void>;
  close(): Promise<void>;
}
