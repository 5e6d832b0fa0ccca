import { sha256, type Catalog } from '../../catalog/catalog.js';
import type { Embedder } from '../../embedding/embedder.js';
import { MemoryEmbeddingCache } from '../../indexing/embedding-cache.js';
import type { LexicalSettings } from '../../indexing/lexical.js';
import type { IndexManager } from '../../indexing/manager.js';
import type { HnswSettings } from '../../indexing/vector.js';
import type { Metrics } from '../../metrics.js';
import type { RequestTool } from './tool-request.js';
import { createFixedSearch } from '../../search/fixed.js';
import { toolTokens } from '../../search/tokens.js';
import { indexableTool } from './tools.js';

/** A search stack over one request's tool list: the same parts the router's own catalog search runs on. */
export interface ToolIndex {
  catalog: Catalog;
  indexes: IndexManager;
  /** Prompt tokens of each tool definition, in list order. */
  tokens: readonly number[];
}

/** A function tool of a request. */
export type FunctionTool = Required<RequestTool>;

export interface ToolIndexCacheOptions {
  /** Tool lists kept; 0 disables caching. */
  size: number;
  embedder: Embedder;
  lexical: LexicalSettings;
  hnsw: HnswSettings;
  /** The router's metrics (cache hits and misses); without it nothing is counted. */
  metrics?: Pick<Metrics, 'chatToolIndexLookups'>;
}

/** Tool texts whose vectors are kept across lists, so a list that differs by one tool embeds one tool. */
const EMBEDDING_CACHE_SIZE = 100_000;

/**
 * Indexes of request tool lists, least recently used first out, keyed by a hash of what the index is made of.
 * Callers send the same list with every turn of a conversation, so all turns after the first cost a hash and a search.
 */
export class ToolIndexCache {
  private readonly entries = new Map<string, Promise<ToolIndex>>();
  private readonly embeddings = new MemoryEmbeddingCache(EMBEDDING_CACHE_SIZE);

  constructor(private readonly options: ToolIndexCacheOptions) {}

  /**
   * The index for these tools, built on a miss; requests for a list that is being built wait for that build. The key
   * is the hash of the definitions as sent, one serialisation of the list, and the token counts hang on it too.
   */
  async get(tools: readonly FunctionTool[]): Promise<{ index: ToolIndex; hit: boolean }> {
    const key = sha256(JSON.stringify(tools.map((tool) => tool.definition)));
    const cached = this.entries.get(key);
    if (cached) {
      // Re-inserting marks it most recently used.
      this.entries.delete(key);
      this.entries.set(key, cached);
      this.options.metrics?.chatToolIndexLookups.inc({ result: 'hit' });
      return { index: await cached, hit: true };
    }
    this.options.metrics?.chatToolIndexLookups.inc({ result: 'miss' });
    const building = this.build(tools);
    if (this.options.size > 0) {
      this.entries.set(key, building);
      while (this.entries.size > this.options.size) this.entries.delete(this.entries.keys().next().value!);
      // A failed build is not remembered: the next request tries again.
      building.catch(() => {
        if (this.entries.get(key) === building) this.entries.delete(key);
      });
    }
    return { index: await building, hit: false };
  }

  get size(): number {
    return this.entries.size;
  }

  private async build(tools: readonly FunctionTool[]): Promise<ToolIndex> {
    const { catalog, indexes } = await createFixedSearch(
      tools.map((tool) => indexableTool(tool.function)),
      { embedder: this.options.embedder, cache: this.embeddings, lexical: this.options.lexical, hnsw: this.options.hnsw, source: 'request' },
    );
    return { catalog, indexes, tokens: tools.map((tool) => toolTokens(tool.definition)) };
  }
}
