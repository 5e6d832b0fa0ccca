import { Catalog } from '../catalog/catalog.js';
import type { Tool } from '../catalog/types.js';
import type { Embedder } from '../embedding/embedder.js';
import type { EmbeddingCache } from '../indexing/embedding-cache.js';
import type { LexicalSettings } from '../indexing/lexical.js';
import { IndexManager } from '../indexing/manager.js';
import { buildSearchIndex, type BuildStats, type SearchIndex } from '../indexing/search-index.js';
import type { HnswSettings } from '../indexing/vector.js';
import type { Reranker } from './rerank.js';
import { DEFAULT_SEARCH_SETTINGS, SearchService, type FeedbackSignal, type SearchSettings } from './search.js';

export interface FixedSearchOptions {
  embedder: Embedder;
  lexical?: LexicalSettings;
  hnsw?: HnswSettings;
  /** Vectors kept across builds: a list that differs from an earlier one by a tool embeds one tool. */
  cache?: EmbeddingCache;
  /** The search defaults (config `search`); DEFAULT_SEARCH_SETTINGS without. */
  settings?: SearchSettings;
  feedback?: FeedbackSignal;
  reranker?: Reranker;
  /** The catalog's server/tool separator (config `catalog.separator`). */
  separator?: string;
  /** The catalog source the tools are filed under. */
  source?: string;
}

/** A search stack over one fixed tool list: the same parts, in the same order, as the router's own catalog search. */
export interface FixedSearch {
  catalog: Catalog;
  indexes: IndexManager;
  index: SearchIndex;
  search: SearchService;
  stats: BuildStats;
}

/** A catalog holding just these tools, as `createFixedSearch` files them. */
export function fixedCatalog(tools: readonly Tool[], options: Pick<FixedSearchOptions, 'separator' | 'source'> = {}): Catalog {
  const catalog = new Catalog(options.separator === undefined ? {} : { separator: options.separator });
  catalog.setSource(options.source ?? 'fixed', tools);
  return catalog;
}

/**
 * Search over a fixed list of tools (evaluation, tuning, benchmarks, a chat request's own tool list): catalog, index
 * built and installed, and a `SearchService` over them. Callers that need other settings per query build another
 * `SearchService` over `catalog` and `indexes`; ranking itself always happens in `SearchService`.
 */
export async function createFixedSearch(tools: readonly Tool[] | Catalog, options: FixedSearchOptions): Promise<FixedSearch> {
  const catalog = tools instanceof Catalog ? tools : fixedCatalog(tools, options);
  const snapshot = catalog.snapshot();
  const { index, stats } = await buildSearchIndex(snapshot, {
    embedder: options.embedder,
    ...(options.cache ? { cache: options.cache } : {}),
    ...(options.lexical ? { lexical: options.lexical } : {}),
    ...(options.hnsw ? { hnsw: options.hnsw } : {}),
  });
  const indexes = new IndexManager(snapshot);
  indexes.install(index, 0);
  const search = new SearchService({
    catalog,
    indexes,
    embedder: options.embedder,
    settings: options.settings ?? DEFAULT_SEARCH_SETTINGS,
    ...(options.feedback ? { feedback: options.feedback } : {}),
    ...(options.reranker ? { reranker: options.reranker } : {}),
  });
  return { catalog, indexes, index, search, stats };
}
