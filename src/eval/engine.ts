import type { Catalog } from '../catalog/catalog.js';
import type { Tool } from '../catalog/types.js';
import { loadConfig, type Config } from '../config/config.js';
import { createEmbedder, type Embedder } from '../embedding/embedder.js';
import { FeedbackService } from '../feedback/service.js';
import { MemoryFeedbackStore } from '../feedback/store.js';
import type { SearchIndex } from '../index/search-index.js';
import { createFixedSearch } from '../search/fixed.js';
import type { SearchService } from '../search/search.js';

/** A complete in-process search stack over a fixed tool list, for evaluation, tuning and benchmarks. */
export interface Engine {
  catalog: Catalog;
  search: SearchService;
  index: SearchIndex;
  embedder: Embedder;
  config: Config;
  /** Feedback in memory, empty until replayed (`eval --feedback`): until then, searches rank as without it. */
  feedback?: FeedbackService;
}

export async function createEngine(tools: Tool[], options: { config?: Config; embedder?: Embedder } = {}): Promise<Engine> {
  const config = options.config ?? loadConfig({ ...process.env, TOOLROUTER_CONFIG: process.env.TOOLROUTER_CONFIG ?? '' });
  const embedder = options.embedder ?? (await createEmbedder(config.embedding));
  const settings = { ...config.feedback, enabled: true };
  const feedback = new FeedbackService(embedder, new MemoryFeedbackStore(settings), settings);
  const { catalog, index, search } = await createFixedSearch(tools, {
    embedder,
    source: 'eval',
    separator: config.catalog.separator,
    lexical: config.search.lexical,
    hnsw: config.search.hnsw,
    settings: config.search,
    feedback,
  });
  return { catalog, search, index, embedder, config, feedback };
}
