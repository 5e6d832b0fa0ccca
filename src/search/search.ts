import type { Catalog, CatalogEntry, CatalogSnapshot } from '../catalog/catalog.js';
import type { Tool } from '../catalog/types.js';
import type { Embedder } from '../embedding/embedder.js';
import { ToolrouterError } from '../errors.js';
import { LabelSet } from '../indexing/label-set.js';
import type { ScoredName } from '../indexing/lexical.js';
import type { IndexManager } from '../indexing/manager.js';
import type { SearchIndex } from '../indexing/search-index.js';
import type { Metrics } from '../metrics.js';
import { RegexHaystacks } from './regex.js';
import { fusionMethodSchema, mergeWeights } from './weights.js';
import {
  adaptiveWeights,
  DEFAULT_ADAPTIVE_FUSION,
  distributionScale,
  fuse,
  type AdaptiveFusionSettings,
  type FusedResult,
  type FusionMethod,
  type FusionWeights,
} from './fusion.js';
import { DEFAULT_RERANK_SETTINGS, rerankCandidates, type Reranker, type RerankSettings } from './rerank.js';
import { embeddingSpan, searchSpan } from '../telemetry/spans.js';
import {
  answers,
  calibratedScores,
  calibrationFor,
  rankedFeatures,
  type CalibrationMode,
  type CalibrationModel,
  type RelevanceFeatures,
} from './calibration.js';

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
  /** Per-query vector weight from the vector margin, on top of the base weights (weighted fusion only). */
  adaptive?: AdaptiveFusionSettings;
  /**
   * The default cut: a query whose top hit's calibrated score (an estimate in [0, 1] that the tool answers the query,
   * src/search/calibration.ts) is below this gets nothing, unless learned usage vouches for a hit shown (`answers`);
   * an answered query gets its top_k. Unset: the calibration's own for the index's embedding model
   * (`calibrationFor`), which `settings` reports. A request's own min_score instead drops each hit scoring below it.
   */
  minScore?: number;
  /** The calibration models per mode; without, the index's embedding model's (`calibrationFor`). */
  calibration?: Record<CalibrationMode, CalibrationModel>;
  /**
   * Longest wait for the query's embedding. Past it, or when the embeddings provider fails, the answer comes from
   * BM25 alone and says so (`fallback`): an embeddings outage must not cost a search.
   */
  embedTimeoutMs?: number;
  rerank?: RerankSettings;
}

export const DEFAULT_SEARCH_SETTINGS: SearchSettings = {
  mode: 'hybrid',
  topK: 5,
  maxTopK: 50,
  // 0.6 / 0.4 with BM25's coverage rule (issue 42); 0.55 / 0.45 before it (BENCHMARKS.md, "Everyday search").
  weights: { bm25: 0.6, vector: 0.4 },
  fusion: 'weighted',
  candidates: 50,
  pinned: [],
  adaptive: DEFAULT_ADAPTIVE_FUSION,
  // minScore unset: each embedding model's calibration carries its own (src/search/calibration.ts).
  embedTimeoutMs: 2_000,
  rerank: DEFAULT_RERANK_SETTINGS,
};

export interface SearchRequest {
  query: string;
  topK?: number;
  mode?: SearchMode;
  weights?: Partial<FusionWeights>;
  fusion?: FusionMethod;
  /**
   * Restricts results to tools the caller may see; applied before ranking is cut to top_k. Leave it out for a caller
   * who sees everything: any predicate, even one that accepts all, costs a per-request pass over the catalog.
   */
  visible?: (entry: CatalogEntry) => boolean;
  /**
   * Names what `visible` accepts (an API key and its rules), so the set of visible tools is worked out once per key,
   * index and catalog instead of on every request. Two requests with the same key must have the same `visible`.
   */
  visibilityKey?: string;
  /** Whose feedback counts (an API key id) when feedback.isolation is "key"; ignored when it is "global". */
  feedbackScope?: string;
  /**
   * Drops results scoring below it (after reranking, on the score returned), instead of the default cut's judgement
   * on the query (settings.minScore); 0 keeps all.
   */
  minScore?: number;
  /** false skips the reranker for this request. */
  rerank?: boolean;
  /** Attach each hit's calibration features (evaluation only; never set from a request). */
  explain?: boolean;
  /** Where this search came from, for the search log (SearchObserver); absent, the search is not logged (evaluation, tuning). */
  observe?: SearchObservation;
}

/** Which face asked and for whom: what the search log records besides the search itself. */
export interface SearchObservation {
  /** The face (src/analytics SEARCH_SURFACES: mcp, mcp_list, code, rest, proxy, proxy_search). */
  surface: string;
  /** The caller's key id; absent for the admin and open callers. */
  key?: string;
}

/**
 * Told of every search that carries `observe` once it is answered (src/analytics records it). Must return at once and
 * never throw: a search never waits for, or fails because of, what watches it.
 */
export interface SearchObserver {
  searched(search: SearchObservation & { query: string; results: readonly SearchHit[]; matched?: number; ms: number }): void;
}

/** The feedback signal (src/feedback): tools called for similar past queries, scored in [-1, 1]. */
export interface FeedbackSignal {
  /** Default fusion weight, used when neither the request nor the settings give weights.feedback. */
  readonly weight: number;
  boosts(query: Float32Array, scope?: string): ScoredName[];
}

export interface SearchHit {
  tool: Tool;
  /** Calibrated relevance in [0, 1] for ranked modes (1 for select and regex matches). */
  score: number;
  /** Each signal's own score: raw BM25, cosine, feedback, the reranker's; and the fused ranking score (`fused`). */
  scores: { bm25?: number; vector?: number; feedback?: number; rerank?: number; fused?: number };
  /** With `explain`: what the calibrated score was computed from. */
  features?: RelevanceFeatures;
}

/** A ranked candidate with its calibrated score. */
interface RankedResult extends FusedResult {
  relevance: number;
  features: RelevanceFeatures;
}

/** Why a ranked search answered from BM25 alone: the query could not be embedded in time. */
export interface SearchFallback {
  mode: 'bm25';
  reason: 'embedding_timeout' | 'embedding_error';
  message: string;
}

/** One query's candidates, retrieved once (`SearchService.prepare`), ranked under any fusion settings. */
export interface PreparedSearch {
  /** What `search` answers for the prepared request with these fields replaced. */
  rank(overrides?: Pick<SearchRequest, 'weights' | 'fusion' | 'topK' | 'minScore' | 'rerank'>): Promise<SearchResponse>;
}

/** Each signal's candidates for one query, before fusion. */
interface Signals {
  lexical: ScoredName[];
  semantic: ScoredName[];
  feedback: ScoredName[];
  /** Set when the query could not be embedded: only `lexical` was retrieved. */
  fallback?: SearchFallback;
}

export interface SearchResponse {
  results: SearchHit[];
  /**
   * Ranked modes: how many tools matched at or above min_score among the candidates (at most `candidates` per signal),
   * so a caller shown `results.length` of them knows whether asking for more would find more.
   */
  matched?: number;
  index: { hash: string | null; model: string | null };
  /** Present when the embeddings provider failed or timed out and the answer is BM25's. */
  fallback?: SearchFallback;
}

/** The query's embedding; undefined for a query of only unknown words, which says nothing about similarity. */
export async function queryEmbedding(embedder: Embedder, query: string, signal?: AbortSignal): Promise<Float32Array | undefined> {
  const [vector] = await embeddingSpan(embedder, 1, () => embedder.embed([query], { role: 'query', ...(signal ? { signal } : {}) }));
  return vector && vector.some((value) => value !== 0) ? vector : undefined;
}

/** Visibility keys whose label sets are kept per index (oldest dropped first). */
const MAX_CACHED_LABEL_SETS = 32;
/**
 * Neighbours fetched unfiltered for a caller without a visibility key: the default efSearch, so the graph walk costs
 * the same as for the top few, and at 10k tools several times cheaper than a walk calling a filter at every node.
 */
const UNFILTERED_CANDIDATES = 512;

export class IndexNotReadyError extends ToolrouterError {
  override readonly name = 'IndexNotReadyError';
  constructor(message: string) {
    super('index_not_ready', message);
  }
}

/** A caller's visible tools as labels of each of an index's two searches. */
interface VisibleLabels {
  lexical: LabelSet;
  vectors: LabelSet;
}

function sameNames(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Answers queries over the catalog. Ranked modes read the live index; results are resolved against the current catalog,
 * so a tool removed since the index was built is never returned, and definitions are always the current ones.
 */
/** What a SearchService searches with. */
export interface SearchServiceOptions {
  catalog: Catalog;
  indexes: IndexManager;
  /** Embeds the query for vector and hybrid search (the model the live index was built with). */
  embedder: Embedder;
  /** The defaults a request gets for what it leaves out; replaced as a whole by updateFusionDefaults. */
  settings: SearchSettings;
  /** Learning from usage; without it hybrid search fuses BM25 and vectors only. */
  feedback?: FeedbackSignal;
  /** Re-scores the top fused candidates when settings.rerank.enabled; without it nothing is reranked. */
  reranker?: Reranker;
  /** The router's metrics (search duration, results, fallbacks, reranks); without it nothing is counted. */
  metrics?: Metrics;
  /** The search log: told of each search that says where it came from (`observe`); without it nothing is logged. */
  observer?: SearchObserver;
}

export class SearchService {
  readonly feedback?: FeedbackSignal;
  readonly metrics?: Metrics;
  readonly observer?: SearchObserver;
  private readonly catalog: Catalog;
  private readonly indexes: IndexManager;
  private readonly embedder: Embedder;
  private readonly reranker?: Reranker;
  private readonly pinned: Set<string>;
  private current: SearchSettings;
  /** `current` with min_score filled in from the live model's calibration, for the settings and model it was made for. */
  private resolved?: { from: SearchSettings; model: string | null; settings: SearchSettings };
  /** Visible label sets by visibility key, per live index and for the catalog snapshot they were computed against. */
  /** Regex mode's prepared text, per catalog snapshot. */
  private readonly haystacks = new WeakMap<CatalogSnapshot, RegexHaystacks>();
  private readonly labelSets = new WeakMap<SearchIndex, { snapshot: CatalogSnapshot; byKey: Map<string, VisibleLabels> }>();

  constructor({ catalog, indexes, embedder, settings, feedback, reranker, metrics, observer }: SearchServiceOptions) {
    this.catalog = catalog;
    this.indexes = indexes;
    this.embedder = embedder;
    if (feedback) this.feedback = feedback;
    if (reranker) this.reranker = reranker;
    if (metrics) this.metrics = metrics;
    if (observer) this.observer = observer;
    this.current = settings;
    this.pinned = new Set(settings.pinned);
  }

  /** The defaults a request gets for what it leaves out; min_score, when not configured, the live model's calibration's. */
  get settings(): Readonly<SearchSettings> {
    if (this.current.minScore !== undefined) return this.current;
    const model = this.indexes.current?.model ?? null;
    if (this.resolved?.from !== this.current || this.resolved.model !== model) {
      this.resolved = { from: this.current, model, settings: { ...this.current, minScore: calibrationFor(model).minScore } };
    }
    return this.resolved.settings;
  }

  /**
   * Replaces the default fusion (the console's "apply"). A new settings object, never a mutation: a search already
   * running keeps the weights it started with, and the configuration the object came from stays as configured.
   */
  updateFusionDefaults(update: { weights?: Partial<FusionWeights>; fusion?: FusionMethod }): Readonly<SearchSettings> {
    // Bad weights are the caller's mistake, whoever passed them on: an InvalidWeightsError, answered as a 400.
    const weights = mergeWeights(this.current.weights, update.weights);
    const fusion = fusionMethodSchema.safeParse(update.fusion ?? this.current.fusion);
    if (!fusion.success) throw new ToolrouterError('invalid_request', `fusion: ${fusion.error.issues[0]?.message}`, { param: 'fusion' });
    this.current = { ...this.current, weights, fusion: fusion.data };
    return this.current;
  }

  async search(request: SearchRequest): Promise<SearchResponse> {
    const { query, mode } = this.parse(request);
    const stopTimer = this.metrics?.searchDuration.startTimer({ mode });
    const started = performance.now();
    const response = await searchSpan({ mode, topK: request.topK, query }, () => this.answer(query, mode, request));
    stopTimer?.();
    this.metrics?.searchResults.observe({ mode }, response.results.length);
    if (this.observer && request.observe) {
      const { surface, key } = request.observe;
      const ms = performance.now() - started;
      this.observer.searched({ surface, ...(key === undefined ? {} : { key }), query: request.query.trim(), results: response.results, ms, ...(response.matched === undefined ? {} : { matched: response.matched }) });
    }
    return response;
  }

  /**
   * Retrieves a query's candidates from every signal once, to rank them under many fusion settings (tuning, the
   * console's evaluation) exactly as `search` ranks them: the same pinning, visibility, fusion and cut. Nothing is
   * counted in the search metrics. Select and regex queries have no signals to keep; they are answered afresh.
   */
  async prepare(request: SearchRequest): Promise<PreparedSearch> {
    const { query, mode } = this.parse(request);
    if (mode === 'select' || mode === 'regex') return { rank: (overrides = {}) => this.answer(query, mode, { ...request, ...overrides }) };
    const { live, accept, filter } = this.ranking(request);
    const need = { lexical: mode !== 'vector', vector: mode !== 'bm25', feedback: mode === 'hybrid' && this.feedback !== undefined };
    const signals = await this.retrieve(live, query, need, filter, request);
    return {
      rank: (overrides = {}) => {
        const merged = { ...request, ...overrides };
        const { ranked, fallback } = this.fuseSignals(live, signals, mode, merged);
        return this.finish(live, query, ranked, fallback, merged, accept);
      },
    };
  }

  /** The query without its prefix, and the mode the prefix or the request asks for. */
  private parse(request: SearchRequest): { query: string; mode: SearchMode | 'select' } {
    const trimmed = request.query.trim();
    const prefix = trimmed.toLowerCase();
    const mode = prefix.startsWith(SELECT_PREFIX) ? 'select' : prefix.startsWith(REGEX_PREFIX) ? 'regex' : (request.mode ?? this.settings.mode);
    const query = prefix.startsWith(REGEX_PREFIX) ? trimmed.slice(REGEX_PREFIX.length) : trimmed;
    return { query, mode };
  }

  private async answer(query: string, mode: SearchMode | 'select', request: SearchRequest): Promise<SearchResponse> {
    if (mode === 'select' || mode === 'regex') {
      const topK = Math.min(request.topK ?? this.settings.topK, this.settings.maxTopK);
      const visible = request.visible ?? (() => true);
      const live = this.indexes.current;
      const index = { hash: live?.catalogHash ?? null, model: live?.model ?? null };
      if (mode === 'select') return { results: this.select(query.slice(SELECT_PREFIX.length), visible).slice(0, topK), index };
      return { results: this.regex(query, topK, visible), index };
    }
    const { live, accept, filter } = this.ranking(request);
    // Only the signals these weights use are retrieved: a search pays for no embedding its ranking ignores.
    const need = this.signalsUsed(mode, { ...this.settings.weights, ...request.weights });
    const signals = await this.retrieve(live, query, need, filter, request);
    const { ranked, fallback } = this.fuseSignals(live, signals, mode, request);
    return this.finish(live, query, ranked, fallback, request, accept);
  }

  /**
   * The live index, and which tools a ranking may return. A caller who sees only part of the catalog (an API key) gets
   * the best of what it may see, not what is left of everyone's best: the filter goes into the index searches. Pinned
   * tools are left out the same way.
   */
  private ranking(request: SearchRequest): { live: SearchIndex; accept: (name: string) => boolean; filter: ((name: string) => boolean) | undefined } {
    const live = this.indexes.current;
    if (!live) throw new IndexNotReadyError('the search index is still being built; retry shortly or check /v1/index/status');
    const visible = request.visible ?? (() => true);
    const accept = (name: string) => {
      if (this.pinned.has(name)) return false;
      const entry = this.catalog.get(name);
      return entry !== undefined && visible(entry);
    };
    const filtered = request.visible !== undefined || this.pinned.size > 0;
    return { live, accept, filter: filtered ? accept : undefined };
  }

  /** Which signals a ranking with these weights reads. */
  private signalsUsed(mode: SearchMode, weights: FusionWeights): { lexical: boolean; vector: boolean; feedback: boolean; feedbackWeight: number } {
    const feedbackWeight = weights.feedback ?? this.feedback?.weight ?? 0;
    return {
      lexical: mode === 'bm25' || (mode === 'hybrid' && weights.bm25 > 0),
      vector: mode === 'vector' || (mode === 'hybrid' && weights.vector > 0),
      feedback: mode === 'hybrid' && this.feedback !== undefined && feedbackWeight > 0,
      feedbackWeight,
    };
  }

  /** Each needed signal's candidates. When the query cannot be embedded, BM25's are all there is. */
  private async retrieve(
    live: SearchIndex,
    query: string,
    need: { lexical: boolean; vector: boolean; feedback: boolean },
    accept: ((name: string) => boolean) | undefined,
    request: SearchRequest,
  ): Promise<Signals> {
    const limit = this.settings.candidates;
    // A keyed caller's visible tools as labels of each index, worked out once per key: both searches then test a byte
    // per candidate instead of asking the catalog about each.
    const labels = accept && request.visibilityKey !== undefined ? this.visibleLabels(live, accept, request.visibilityKey) : undefined;
    const lexical = () => live.lexical.search(query, limit, labels?.lexical ?? accept);
    // One embedding serves both the vector index and the feedback's recorded queries.
    const embedded = need.vector || need.feedback ? await this.embedQuery(live, query, need.vector) : { vector: undefined };
    if (embedded.fallback) return { lexical: lexical(), semantic: [], feedback: [], fallback: embedded.fallback };
    const { vector } = embedded;
    return {
      lexical: need.lexical ? lexical() : [],
      semantic: need.vector && vector ? this.nearest(live, vector, limit, accept, labels?.vectors) : [],
      feedback: need.feedback && vector ? this.feedback!.boosts(vector, request.feedbackScope) : [],
    };
  }

  /** The one place signals become a ranking: every search, and every setting tried by tuning, goes through here. */
  private fuseSignals(live: SearchIndex, signals: Signals, mode: SearchMode, request: SearchRequest): { ranked: RankedResult[]; fallback?: SearchFallback } {
    const { ranked, fallback } = this.rank(signals, mode, request);
    const calibrationMode: CalibrationMode = fallback || mode === 'bm25' ? 'bm25' : mode === 'vector' ? 'vector' : 'hybrid';
    // The ranking score each mode orders by, spread onto a comparable scale for the `ranking` feature.
    // Only the signals this ranking used: a search that did not retrieve one must score as a prepared one ranking without it.
    const use = this.signalsUsed(mode, { ...this.settings.weights, ...request.weights });
    const lexical = use.lexical ? signals.lexical : [];
    const semantic = use.vector && calibrationMode !== 'bm25' ? signals.semantic : [];
    const rankingScores = calibrationMode === 'hybrid' ? ranked : normalised(ranked, calibrationMode === 'bm25' ? lexical : semantic);
    const features = rankedFeatures(rankingScores, lexical, semantic);
    // The index's embedding model's calibration: cosines mean different things under different models.
    const models = this.settings.calibration ?? calibrationFor(live.model).models;
    const relevance = calibratedScores(features, models[calibrationMode]);
    const results = ranked.map((result, i) => ({ ...result, relevance: relevance[i]!, features: features[i]! }));
    return fallback ? { ranked: results, fallback } : { ranked: results };
  }

  private rank(signals: Signals, mode: SearchMode, request: SearchRequest): { ranked: FusedResult[]; fallback?: SearchFallback } {
    const weights = { ...this.settings.weights, ...request.weights };
    const use = this.signalsUsed(mode, weights);
    const bm25Only = (hits: readonly ScoredName[]) => hits.map((hit) => ({ name: hit.name, score: hit.score, scores: { bm25: hit.score } }));
    if (signals.fallback && (use.vector || use.feedback)) {
      // The same BM25 ranking a bm25-mode search gives, whatever the weights: fused with nothing, its order is BM25's.
      return { ranked: bm25Only(signals.lexical), fallback: signals.fallback };
    }
    const lexical = use.lexical ? signals.lexical : [];
    const semantic = use.vector ? signals.semantic : [];
    if (mode === 'bm25') return { ranked: bm25Only(lexical) };
    if (mode === 'vector') return { ranked: semantic.map((hit) => ({ name: hit.name, score: hit.score, scores: { vector: hit.score } })) };
    const feedback = use.feedback ? signals.feedback : [];
    // The weights (configured, or the request's) are the base; in weighted fusion each signal's weight then follows its
    // evidence for this query: the vector margin, BM25's coverage of the query (fusion.ts, adaptiveWeights). rrf ignores score gaps, so it stays as given.
    const method = request.fusion ?? this.settings.fusion;
    const adaptive = this.settings.adaptive;
    const fused = method === 'weighted' && adaptive ? adaptiveWeights(semantic, weights, adaptive, lexical) : weights;
    return { ranked: fuse(lexical, semantic, { ...fused, feedback: use.feedbackWeight }, method, feedback) };
  }

  /** Resolves a ranking against the catalog, reranks it if configured, abstains below min_score, and cuts it to top_k. */
  private async finish(
    live: SearchIndex,
    query: string,
    ranked: readonly RankedResult[],
    fallback: SearchFallback | undefined,
    request: SearchRequest,
    accept: (name: string) => boolean,
  ): Promise<SearchResponse> {
    const topK = Math.min(request.topK ?? this.settings.topK, this.settings.maxTopK);
    const index = { hash: live.catalogHash, model: live.model };
    const rerank = this.settings.rerank;
    const reranking = this.reranker !== undefined && rerank?.enabled === true && request.rerank !== false;
    // A caller's own min_score drops each hit below it (SPEC: "fewer, or none when nothing fits"); the default one is
    // abstention, judged on the query (below).
    const perHit = request.minScore !== undefined;
    const minScore = request.minScore ?? this.current.minScore ?? calibrationFor(live.model).minScore;
    // Checked again: feedback may name tools the index searches did not filter, and the catalog may have moved on.
    // Without a reranker only the first topK that pass are needed, so the rest are never looked up.
    let candidates: SearchHit[] = [];
    // Past topK (without a reranker) candidates are only counted for `matched`, not resolved.
    let beyond = 0;
    for (const candidate of ranked) {
      if (!reranking && candidates.length === topK) {
        if (candidate.relevance >= minScore && accept(candidate.name)) beyond++;
        continue;
      }
      if (!accept(candidate.name) || (perHit && !reranking && candidate.relevance < minScore)) continue;
      candidates.push({
        tool: this.catalog.get(candidate.name)!.tool,
        score: candidate.relevance,
        scores: { ...candidate.scores, fused: candidate.score },
        ...(request.explain ? { features: candidate.features } : {}),
      });
    }
    if (reranking) {
      const relevance = new Map(candidates.map((hit) => [hit.tool.name, hit.score]));
      const reranked = await rerankCandidates(this.reranker!, query, candidates, rerank!, (tool) => this.catalog.get(tool.name)?.text, this.metrics);
      // The reranker orders; `score` stays the calibrated estimate (its own score is in scores.rerank), never above
      // the hit ranked before it.
      let ceiling = 1;
      candidates = reranked.map((hit) => {
        ceiling = Math.min(ceiling, relevance.get(hit.tool.name) ?? 0);
        return { ...hit, score: ceiling };
      });
    }
    if (perHit) {
      const kept = candidates.filter((hit) => hit.score >= minScore);
      const results = kept.slice(0, topK);
      return fallback ? { results, matched: kept.length + beyond, index, fallback } : { results, matched: kept.length + beyond, index };
    }
    // The default cut judges the query, not each hit (calibration.ts, `answers`): an answered query keeps its top_k, so
    // a right answer ranked below a surer hit is not dropped for scoring lower than it (issue 48).
    const shown = candidates.slice(0, topK);
    const answered = answers(shown.map((hit) => hit.score), shown.map((hit) => hit.scores.feedback), minScore);
    const results = answered ? shown : [];
    // Tools at or above min_score (more would be found by asking for more), and at least those shown.
    const matched = answered ? Math.max(results.length, candidates.filter((hit) => hit.score >= minScore).length + beyond) : 0;
    return fallback ? { results, matched, index, fallback } : { results, matched, index };
  }

  /**
   * The nearest tools `accept` takes. A keyed caller's visible set is kept, so its search filters by label (the vector
   * index picks an exact scan or a graph walk by its size). Otherwise the index is asked for as many neighbours as one
   * graph walk explores anyway and those are filtered by name (pinned tools, a gateway's own tools); only when too few
   * pass is the visible set worked out for this request.
   */
  private nearest(
    live: SearchIndex,
    vector: Float32Array,
    limit: number,
    accept: ((name: string) => boolean) | undefined,
    visible: LabelSet | undefined,
  ): ScoredName[] {
    if (!accept) return live.vectors.search(vector, limit);
    if (visible) return live.vectors.search(vector, limit, visible);
    const wide = Math.min(live.vectors.size, Math.max(UNFILTERED_CANDIDATES, limit));
    const hits = live.vectors.search(vector, wide).filter((hit) => accept(hit.name));
    if (hits.length >= limit || wide === live.vectors.size) return hits.slice(0, limit);
    return live.vectors.search(vector, limit, LabelSet.of(live.vectors.names, accept));
  }

  /** The labels `accept` takes in each of the live index's searches; kept per visibility key until the index or the catalog changes. */
  private visibleLabels(live: SearchIndex, accept: (name: string) => boolean, key: string): VisibleLabels {
    const snapshot = this.catalog.snapshot();
    let cached = this.labelSets.get(live);
    if (cached?.snapshot !== snapshot) {
      cached = { snapshot, byKey: new Map() };
      this.labelSets.set(live, cached);
    }
    let labels = cached.byKey.get(key);
    if (!labels) {
      const vectors = LabelSet.of(live.vectors.names, accept);
      // The two indexes list the same tools, normally in the same order; then one set serves both.
      labels = { vectors, lexical: sameNames(live.lexical.names, live.vectors.names) ? vectors : LabelSet.of(live.lexical.names, accept) };
      // Bounded: each set is a byte per tool plus, when small, its gathered vectors.
      if (cached.byKey.size >= MAX_CACHED_LABEL_SETS) cached.byKey.delete(cached.byKey.keys().next().value!);
      cached.byKey.set(key, labels);
    }
    return labels;
  }

  private async embedQuery(
    live: SearchIndex,
    query: string,
    forIndex: boolean,
  ): Promise<{ vector: Float32Array | undefined; fallback?: SearchFallback }> {
    if (forIndex && live.model !== this.embedder.modelId) {
      throw new IndexNotReadyError(`the index was built with model ${live.model}; waiting for a rebuild with ${this.embedder.modelId}`);
    }
    const timeoutMs = this.settings.embedTimeoutMs ?? DEFAULT_SEARCH_SETTINGS.embedTimeoutMs!;
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const outcome = await Promise.race([queryEmbedding(this.embedder, query, controller.signal), timeout]);
      if (outcome !== 'timeout') return { vector: outcome };
      controller.abort();
      this.metrics?.searchFallbacks.inc({ reason: 'embedding_timeout' });
      return {
        vector: undefined,
        fallback: { mode: 'bm25', reason: 'embedding_timeout', message: `the query embedding took longer than ${timeoutMs} ms; ranked by BM25 alone` },
      };
    } catch (error) {
      this.metrics?.searchFallbacks.inc({ reason: 'embedding_error' });
      const reason = error instanceof Error ? error.message : String(error);
      return {
        vector: undefined,
        fallback: { mode: 'bm25', reason: 'embedding_error', message: `the embeddings provider failed (${reason}); ranked by BM25 alone` },
      };
    } finally {
      clearTimeout(timer);
    }
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
    const snapshot = this.catalog.snapshot();
    let haystacks = this.haystacks.get(snapshot);
    if (!haystacks) {
      haystacks = new RegexHaystacks(snapshot.entries);
      this.haystacks.set(snapshot, haystacks);
    }
    return haystacks
      .match(pattern, topK, (entry) => !this.pinned.has(entry.tool.name) && visible(entry))
      .map((entry) => ({ tool: entry.tool, score: 1, scores: {} }));
  }
}

/** A single signal's ranking with its scores spread by their distribution (as weighted fusion spreads them). */
function normalised(ranked: readonly FusedResult[], hits: readonly ScoredName[]): { name: string; score: number }[] {
  const scale = distributionScale(hits);
  const raw = new Map(hits.map((hit) => [hit.name, hit.score]));
  return ranked.map((result) => ({ name: result.name, score: scale(raw.get(result.name) ?? 0) }));
}
