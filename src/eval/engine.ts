import { Catalog } from '../catalog/catalog.js';
import type { Tool } from '../catalog/types.js';
import { loadConfig, type Config } from '../config/config.js';
import { createEmbedder, type Embedder } from '../embedding/embedder.js';
import { MemoryEmbeddingCache } from '../index/embedding-cache.js';
import { LocalIndexBuilder } from '../index/local-builder.js';
import { LocalIndexPipeline } from '../index/local-pipeline.js';
import { IndexManager } from '../index/manager.js';
import type { SearchIndex } from '../index/search-index.js';
import { SearchService } from '../search/search.js';

/** A complete in-process search stack over a fixed tool list, for evaluation, tuning and benchmarks. */
export interface Engine {
  catalog: Catalog;
  search: SearchService;
  index: SearchIndex;
  embedder: Embedder;
  config: Config;
}

export async function createEngine(tools: Tool[], options: { config?: Config; embedder?: Embedder } = {}): Promise<Engine> {
  const config = options.config ?? loadConfig({ ...process.env, TOOLROUTER_CONFIG: process.env.TOOLROUTER_CONFIG ?? '' });
  const embedder = options.embedder ?? (await createEmbedder({ ...config.embedding, model: config.embedding.model }));
  const catalog = new Catalog({ separator: config.catalog.separator });
  catalog.setSource('eval', tools);
  const builder = new LocalIndexBuilder({
    embedder,
    cache: new MemoryEmbeddingCache(),
    lexical: config.search.lexical,
    hnsw: config.search.hnsw,
  });
  const indexes = new IndexManager(catalog.snapshot());
  await new LocalIndexPipeline(indexes, builder).update(catalog.snapshot());
  const index = indexes.current;
  if (!index) throw new Error(`index build failed: ${indexes.status().lastError ?? 'unknown error'}`);
  return { catalog, search: new SearchService(catalog, indexes, embedder, config.search), index, embedder, config };
}
