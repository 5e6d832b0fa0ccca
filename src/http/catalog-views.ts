import { catalogHash, type CatalogSnapshot } from '../catalog/catalog.js';
import type { Access } from '../auth/access.js';
import type { IndexManager, IndexStatus } from '../indexing/manager.js';

/**
 * What a restricted key is told about the index: counts and hashes of its own view (the tools it may see), never the
 * whole catalog's, so it cannot tell when another tenant's tools change. The admin and open callers see the real status.
 */
export class CatalogViews {
  /** The snapshot the live index was built from, when known: the key's indexed view is computed from it. */
  private indexed: CatalogSnapshot | undefined;
  /** View hashes per snapshot and key permissions; computing one filters the whole catalog. */
  private readonly hashes = new WeakMap<CatalogSnapshot, Map<string, { hash: string; tools: number }>>();
  /**
   * Per view: its indexed hash and when the index first held that view. A build for another tenant's change leaves a
   * view's hash as it was, so its builtAt stays too; it moves only when a build changed what this view contains.
   */
  private readonly builds = new Map<string, { hash: string; builtAt: string | null }>();

  constructor(private readonly indexes: IndexManager) {
    const remember = () => {
      const live = indexes.current;
      if (live && live.catalogHash === indexes.target.catalogHash) this.indexed = indexes.target;
      else if (this.indexed?.catalogHash !== live?.catalogHash) this.indexed = undefined;
    };
    remember();
    indexes.on('swapped', remember);
  }

  status(access: Access): IndexStatus {
    const status = this.indexes.status();
    if (!access.restricted) return status;
    const target = this.view(this.indexes.target, access);
    const live = this.indexes.current;
    const indexed = live && this.indexed?.catalogHash === live.catalogHash ? this.view(this.indexed, access) : undefined;
    // A build for someone else's change leaves this key's view as it was: still ready, as far as it can tell.
    const state = status.state === 'failed' ? 'failed' : indexed?.hash === target.hash ? 'ready' : status.state;
    return {
      state,
      catalogHash: target.hash,
      indexedHash: indexed?.hash ?? null,
      model: status.model,
      tools: indexed?.tools ?? 0,
      builtAt: indexed ? this.builtAt(access.viewKey, indexed.hash, status.builtAt) : null,
      // Build errors may name other tenants' tools or servers.
      ...(state === 'failed' ? { lastError: 'the index build failed; the admin can see why in /v1/index/status' } : {}),
    };
  }

  /** The hash of what this caller may see of a snapshot (GET /v1/catalog's catalogHash for a restricted key). */
  catalogHash(snapshot: CatalogSnapshot, access: Access): string {
    return access.restricted ? this.view(snapshot, access).hash : snapshot.catalogHash;
  }

  private builtAt(viewKey: string, hash: string, liveBuiltAt: string | null): string | null {
    const known = this.builds.get(viewKey);
    if (known?.hash === hash) return known.builtAt;
    // First seen now (or changed): the live index holds it, built at liveBuiltAt; that is the nearest bound known.
    this.builds.delete(viewKey);
    this.builds.set(viewKey, { hash, builtAt: liveBuiltAt });
    if (this.builds.size > 1_000) this.builds.delete(this.builds.keys().next().value!);
    return liveBuiltAt;
  }

  /** The `index` field of a search answer, as this caller may see it. */
  searchIndex(access: Access, index: { hash: string | null; model: string | null }): { hash: string | null; model: string | null } {
    if (!access.restricted) return index;
    const live = this.indexes.current;
    const indexed = live && this.indexed?.catalogHash === live.catalogHash ? this.view(this.indexed, access) : undefined;
    return { hash: indexed?.hash ?? null, model: index.model };
  }

  private view(snapshot: CatalogSnapshot, access: Access): { hash: string; tools: number } {
    const key = access.viewKey;
    let byKey = this.hashes.get(snapshot);
    if (!byKey) {
      byKey = new Map();
      this.hashes.set(snapshot, byKey);
    }
    let view = byKey.get(key);
    if (!view) {
      const visible = snapshot.entries.filter((entry) => access.canSee(entry));
      view = { hash: catalogHash(visible), tools: visible.length };
      byKey.set(key, view);
      if (byKey.size > 1_000) byKey.delete(byKey.keys().next().value!);
    }
    return view;
  }
}

const views = new WeakMap<IndexManager, CatalogViews>();

/** One per index manager, shared by the routes that report on it. */
export function catalogViews(indexes: IndexManager): CatalogViews {
  let found = views.get(indexes);
  if (!found) {
    found = new CatalogViews(indexes);
    views.set(indexes, found);
  }
  return found;
}
