import { Catalog } from '../catalog/catalog.js';
import type { Tool } from '../catalog/types.js';
import { createEmbedder, type Embedder, type EmbedderOptions } from '../embedding/embedder.js';
import { FeedbackService } from '../feedback/service.js';
import type { FeedbackSettings } from '../feedback/settings.js';
import { MemoryFeedbackStore } from '../feedback/store.js';
import type { SearchIndex } from '../indexing/search-index.js';
import { createFixedSearch } from '../search/fixed.js';
import type { SearchService } from '../search/search.js';
import type { SearchConfig } from '../search/settings.js';
import type { EvalSource } from './datasets.js';

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

/**
 * An engine over a tool list (one source), or over sources with descriptions (server context: each source's
 * description is indexed with its tools, as for an upstream or a described static source).
 */
export async function createEngine(tools: Tool[] | EvalSource[], options: { config: EngineConfig; embedder?: Embedder }): Promise<Engine> {
  const { config } = options;
  let catalogOrTools: Tool[] | Catalog = tools as Tool[];
  if (tools.length > 0 && 'source' in tools[0]!) {
    const catalog = new Catalog({ separator: config.catalog.separator });
    for (const { source, description, tools: own } of tools as EvalSource[]) catalog.setSource(source, own, undefined, description);
    catalogOrTools = catalog;
  }
  const embedder = options.embedder ?? (await createEmbedder(config.embedding));
  const settings = { ...config.feedback, enabled: true };
  const feedback = new FeedbackService(embedder, new MemoryFeedbackStore(settings), settings);
  const { catalog, index, search } = await createFixedSearch(catalogOrTools, {
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
