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
/** `regex:<pattern>` searches in regex mode whatever mode was asked for, so a query means the same on every face. */
export const REGEX_PREFIX = 'regex:';

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
  /** Whose feedback counts (an API key id) when feedback.isolation is "key"; ignored when it is "global". */
  feedbackScope?: string;
}

/** The feedback signal (src/feedback): tools called for similar past queries, scored in [-1, 1]. */
export interface FeedbackSignal {
  /** Default fusion weight, used when neither the request nor the settings give weights.feedback. */
  readonly weight: number;
  boosts(query: Float32Array, scope?: string): ScoredName[];
}

export interface SearchHit {
  tool: Tool;
  score: number;
  scores: { bm25?: number; vector?: number; feedback?: number };
}

export interface SearchResponse {
  results: SearchHit[];
  index: { hash: string | null; model: string | null };
}

/** The index's nearest tools to the query's embedding; none for a query of only unknown words. */
export async function semanticCandidates(index: SearchIndex, embedder: Embedder, query: string, limit: number): Promise<ScoredName[]> {
  const vector = await queryEmbedding(embedder, query);
  return vector ? index.vectors.search(vector, limit) : [];
}

/** The query's embedding; undefined for a query of only unknown words, which says nothing about similarity. */
export async function queryEmbedding(embedder: Embedder, query: string): Promise<Float32Array | undefined> {
  const [vector] = await embedder.embed([query]);
  return vector && vector.some((value) => value !== 0) ? vector : undefined;
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
  private current: SearchSettings;

  constructor(
    private readonly catalog: Catalog,
    private readonly indexes: IndexManager,
    private readonly embedder: Embedder,
    settings: SearchSettings,
    /** Learning from usage; without it hybrid search fuses BM25 and vectors only. */
    readonly feedback?: FeedbackSignal,
  ) {
    this.current = settings;
    this.pinned = new Set(settings.pinned);
  }

  /** The defaults a request gets for what it leaves out. */
  get settings(): Readonly<SearchSettings> {
    return this.current;
  }

  /**
   * Replaces the default fusion (the console's "apply"). A new settings object, never a mutation: a search already
   * running keeps the weights it started with, and the configuration the object came from stays as configured.
   */
  updateFusionDefaults(update: { weights?: Partial<FusionWeights>; fusion?: FusionMethod }): Readonly<SearchSettings> {
    const weights = { ...this.current.weights, ...update.weights };
    if (!Object.values(weights).every((weight) => Number.isFinite(weight) && weight >= 0) || weights.bm25 + weights.vector <= 0) {
      throw new RangeError('weights must be finite, 0 or more, and bm25 + vector must be positive');
    }
    this.current = { ...this.current, weights, fusion: update.fusion ?? this.current.fusion };
    return this.current;
  }

  async search(request: SearchRequest): Promise<SearchResponse> {
    const trimmed = request.query.trim();
    const prefix = trimmed.toLowerCase();
    const mode = prefix.startsWith(SELECT_PREFIX) ? 'select' : prefix.startsWith(REGEX_PREFIX) ? 'regex' : (request.mode ?? this.settings.mode);
    const query = prefix.startsWith(REGEX_PREFIX) ? trimmed.slice(REGEX_PREFIX.length) : trimmed;
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
    // A caller who sees only part of the catalog (an API key) gets the best of what it may see, not what is left of
    // everyone's best: the filter goes into the index searches. Pinned tools are left out the same way.
    const accept = (name: string) => {
      if (this.pinned.has(name)) return false;
      const entry = this.catalog.get(name);
      return entry !== undefined && visible(entry);
    };
    const ranked = await this.rank(live, query, mode, request, request.visible || this.pinned.size > 0 ? accept : undefined);
    const results: SearchHit[] = [];
    for (const candidate of ranked) {
      if (results.length >= topK) break;
      // Checked again: feedback may name tools the index searches did not filter, and the catalog may have moved on.
      if (!accept(candidate.name)) continue;
      results.push({ tool: this.catalog.get(candidate.name)!.tool, score: candidate.score, scores: candidate.scores });
    }
    return { results, index: indexInfo };
  }

  private async rank(
    live: SearchIndex,
    query: string,
    mode: SearchMode,
    request: SearchRequest,
    accept: ((name: string) => boolean) | undefined,
  ): Promise<FusedResult[]> {
    const limit = this.settings.candidates;
    const weights = { ...this.settings.weights, ...request.weights };
    const useLexical = mode === 'bm25' || (mode === 'hybrid' && weights.bm25 > 0);
    const useVector = mode === 'vector' || (mode === 'hybrid' && weights.vector > 0);
    const feedbackWeight = weights.feedback ?? this.feedback?.weight ?? 0;
    const useFeedback = mode === 'hybrid' && this.feedback !== undefined && feedbackWeight > 0;
    const lexical = useLexical ? live.lexical.search(query, limit, accept) : [];
    // One embedding serves both the vector index and the feedback's recorded queries.
    const vector = useVector || useFeedback ? await this.embedQuery(live, query, useVector) : undefined;
    const semantic = useVector && vector ? live.vectors.search(vector, limit, accept) : [];
    if (mode === 'bm25') return lexical.map((hit) => ({ name: hit.name, score: hit.score, scores: { bm25: hit.score } }));
    if (mode === 'vector') return semantic.map((hit) => ({ name: hit.name, score: hit.score, scores: { vector: hit.score } }));
    const feedback = useFeedback && vector ? this.feedback!.boosts(vector, request.feedbackScope) : [];
    return fuse(lexical, semantic, { ...weights, feedback: feedbackWeight }, request.fusion ?? this.settings.fusion, feedback);
  }

  private async embedQuery(live: SearchIndex, query: string, forIndex: boolean): Promise<Float32Array | undefined> {
    if (forIndex && live.model !== this.embedder.modelId) {
      throw new IndexNotReadyError(`the index was built with model ${live.model}; waiting for a rebuild with ${this.embedder.modelId}`);
    }
    return queryEmbedding(this.embedder, query);
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
