import RE2 from 're2';
import type { Catalog, CatalogEntry } from '../catalog/catalog.js';
import type { Tool } from '../catalog/types.js';
import type { Embedder } from '../embedding/embedder.js';
import type { ScoredName } from '../index/lexical.js';
import type { IndexManager } from '../index/manager.js';
import type { SearchIndex } from '../index/search-index.js';
import { searchDuration, searchResults } from '../metrics.js';
import { fuse, type FusedResult, type FusionMethod, type FusionWeights } from './fusion.js';

export const SEARCH_MODES = ['hybrid', 'bm25', 'vector', 'regex'] as const;
export type SearchMode = (typeof SEARCH_MODES)[number];

/** `select:a,b` picks tools by exact name instead of searching. */
export const SELECT_PREFIX = 'select:';

export interface SearchSettings {
  mode: SearchMode;
  topK: number;
  maxTopK: number;
  weights: FusionWeights;
  fusion: FusionMethod;
  /** How many candidates each signal contributes to fusion; more costs little and helps recall. */
  candidates: number;
  /** Names of pinned tools: always listed directly, so never spent on a search slot. */
  pinned: readonly string[];
}

export const DEFAULT_SEARCH_SETTINGS: SearchSettings = {
  mode: 'hybrid',
  topK: 5,
  maxTopK: 50,
  weights: { bm25: 0.55, vector: 0.45 },
  fusion: 'weighted',
  candidates: 50,
  pinned: [],
};

export interface SearchRequest {
  query: string;
  topK?: number;
  mode?: SearchMode;
  weights?: Partial<FusionWeights>;
  fusion?: FusionMethod;
  /** Restricts results to tools the caller may see; applied before ranking is cut to top_k. */
  visible?: (entry: CatalogEntry) => boolean;
}

export interface SearchHit {
  tool: Tool;
  score: number;
  scores: { bm25?: number; vector?: number };
}

export interface SearchResponse {
  results: SearchHit[];
  index: { hash: string | null; model: string | null };
}

/** The index's nearest tools to the query's embedding; none for a query of only unknown words. */
export async function semanticCandidates(index: SearchIndex, embedder: Embedder, query: string, limit: number): Promise<ScoredName[]> {
  const [vector] = await embedder.embed([query]);
  // A query of only unknown words embeds to nothing; it says nothing about similarity.
  if (!vector || !vector.some((value) => value !== 0)) return [];
  return index.vectors.search(vector, limit);
}

export class IndexNotReadyError extends Error {
  override readonly name = 'IndexNotReadyError';
}

/**
 * Answers queries over the catalog. Ranked modes read the live index; results are resolved against the current catalog,
 * so a tool removed since the index was built is never returned, and definitions are always the current ones.
 */
export class SearchService {
  private readonly pinned: Set<string>;

  constructor(
    private readonly catalog: Catalog,
    private readonly indexes: IndexManager,
    private readonly embedder: Embedder,
    readonly settings: SearchSettings,
  ) {
    this.pinned = new Set(settings.pinned);
  }

  async search(request: SearchRequest): Promise<SearchResponse> {
    const query = request.query.trim();
    const mode = query.toLowerCase().startsWith(SELECT_PREFIX) ? 'select' : (request.mode ?? this.settings.mode);
    const stopTimer = searchDuration.startTimer({ mode });
    const response = await this.answer(query, mode, request);
    stopTimer();
    searchResults.observe({ mode }, response.results.length);
    return response;
  }

  private async answer(query: string, mode: SearchMode | 'select', request: SearchRequest): Promise<SearchResponse> {
    const topK = Math.min(request.topK ?? this.settings.topK, this.settings.maxTopK);
    const visible = request.visible ?? (() => true);
    const live = this.indexes.current;
    const indexInfo = { hash: live?.catalogHash ?? null, model: live?.model ?? null };

    if (mode === 'select') {
      return { results: this.select(query.slice(SELECT_PREFIX.length), visible).slice(0, topK), index: indexInfo };
    }
    if (mode === 'regex') {
      return { results: this.regex(query, topK, visible), index: indexInfo };
    }
    if (!live) throw new IndexNotReadyError('the search index is still being built; retry shortly or check /v1/index/status');
    const ranked = await this.rank(live, query, mode, request);
    const results: SearchHit[] = [];
    for (const candidate of ranked) {
      if (results.length >= topK) break;
      const entry = this.catalog.get(candidate.name);
      if (!entry || this.pinned.has(candidate.name) || !visible(entry)) continue;
      results.push({ tool: entry.tool, score: candidate.score, scores: candidate.scores });
    }
    return { results, index: indexInfo };
  }

  private async rank(live: SearchIndex, query: string, mode: SearchMode, request: SearchRequest): Promise<FusedResult[]> {
    // Hidden and pinned tools are filtered after ranking, so ask for enough candidates to fill top_k regardless.
    const limit = this.settings.candidates + this.pinned.size;
    const weights = { ...this.settings.weights, ...request.weights };
    const useLexical = mode === 'bm25' || (mode === 'hybrid' && weights.bm25 > 0);
    const useVector = mode === 'vector' || (mode === 'hybrid' && weights.vector > 0);
    const lexical = useLexical ? live.lexical.search(query, limit) : [];
    const semantic = useVector ? await this.vectorSearch(live, query, limit) : [];
    if (mode === 'bm25') return lexical.map((hit) => ({ name: hit.name, score: hit.score, scores: { bm25: hit.score } }));
    if (mode === 'vector') return semantic.map((hit) => ({ name: hit.name, score: hit.score, scores: { vector: hit.score } }));
    return fuse(lexical, semantic, weights, request.fusion ?? this.settings.fusion);
  }

  private async vectorSearch(live: SearchIndex, query: string, limit: number) {
    if (live.model !== this.embedder.modelId) {
      throw new IndexNotReadyError(`the index was built with model ${live.model}; waiting for a rebuild with ${this.embedder.modelId}`);
    }
    return semanticCandidates(live, this.embedder, query, limit);
  }

  private select(list: string, visible: (entry: CatalogEntry) => boolean): SearchHit[] {
    const names = [...new Set(list.split(',').map((name) => name.trim()).filter((name) => name.length > 0))];
    const results: SearchHit[] = [];
    for (const name of names) {
      const entry = this.catalog.get(name);
      if (entry && visible(entry)) results.push({ tool: entry.tool, score: 1, scores: {} });
    }
    return results;
  }

  /** RE2 has no backtracking, so an untrusted pattern runs in linear time; an invalid one matches nothing. */
  private regex(pattern: string, topK: number, visible: (entry: CatalogEntry) => boolean): SearchHit[] {
    let matcher: RE2;
    try {
      matcher = new RE2(pattern, 'i');
    } catch {
      return [];
    }
    const results: SearchHit[] = [];
    for (const entry of this.catalog.snapshot().entries) {
      if (results.length >= topK) break;
      const { tool } = entry;
      if (this.pinned.has(tool.name) || !visible(entry)) continue;
      const haystack = `${tool.name}\n${tool.title ?? ''}\n${tool.description ?? ''}`;
      if (matcher.test(haystack)) results.push({ tool, score: 1, scores: {} });
    }
    return results;
  }
}
