import type { Catalog } from '../catalog/catalog.js';
import type { Tool } from '../catalog/types.js';
import { createEmbedder, type Embedder, type EmbedderOptions } from '../embedding/embedder.js';
import { FeedbackService } from '../feedback/service.js';
import type { FeedbackSettings } from '../feedback/settings.js';
import { MemoryFeedbackStore } from '../feedback/store.js';
import type { SearchIndex } from '../indexing/search-index.js';
import { createFixedSearch } from '../search/fixed.js';
import type { SearchService } from '../search/search.js';
import type { SearchConfig } from '../search/settings.js';

/** The configuration slices an engine is built from (the CLI and the server hand in the loaded configuration). */
export interface EngineConfig {
  catalog: { separator: string };
  search: SearchConfig;
  feedback: FeedbackSettings;
  embedding: EmbedderOptions;
}

/** A complete in-process search stack over a fixed tool list, for evaluation, tuning and benchmarks. */
export interface Engine {
  catalog: Catalog;
  search: SearchService;
  index: SearchIndex;
  embedder: Embedder;
  config: EngineConfig;
  /** Feedback in memory, empty until replayed (`eval --feedback`): until then, searches rank as without it. */
  feedback?: FeedbackService;
}

export async function createEngine(tools: Tool[], options: { config: EngineConfig; embedder?: Embedder }): Promise<Engine> {
  const { config } = options;
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
