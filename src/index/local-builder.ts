import type { CatalogSnapshot } from '../catalog/catalog.js';
import type { Embedder } from '../embedding/embedder.js';
import type { EmbeddingCache } from './embedding-cache.js';
import type { LexicalSettings } from './lexical.js';
import type { IndexBuilder } from './local-pipeline.js';
import { buildSearchIndex, type BuildStats, type SearchIndex } from './search-index.js';
import type { HnswSettings } from './vector.js';

/** Builds indexes in this process: the pipeline used when no Redis is configured. */
export class LocalIndexBuilder implements IndexBuilder {
  constructor(
    private readonly options: {
      embedder: Embedder;
      cache: EmbeddingCache;
      lexical: LexicalSettings;
      hnsw: HnswSettings;
      onBuilt?: (stats: BuildStats, index: SearchIndex) => void;
    },
  ) {}

  async build(snapshot: CatalogSnapshot): Promise<SearchIndex> {
    const { index, stats } = await buildSearchIndex(snapshot, this.options);
    this.options.onBuilt?.(stats, index);
    return index;
  }
}
