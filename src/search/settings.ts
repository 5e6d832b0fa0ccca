/**
 * Search's settings (YAML `search`): schema and defaults. `SearchService` takes the parsed slice as it is; the
 * index's own parts (`lexical`, `hnsw`) come from src/indexing/settings.ts. Assembled by `src/config/`.
 */
import { ONNX_DTYPES } from '../embedding/runtime.js';
import { z } from 'zod';
import { hnswSettingsSchema, lexicalSettingsSchema } from '../indexing/settings.js';
import { DEFAULT_ACTIVATION_THRESHOLDS } from './activation.js';
import { DEFAULT_SEARCH_SETTINGS, SEARCH_MODES } from './search.js';
import { DEFAULT_ADAPTIVE_FUSION } from './fusion.js';
import { fusionMethodSchema, weightsWithDefaults } from './weights.js';

/** A weight left out keeps its default, as a partial `weights` does in the settings API and in a search request. */
export const weightsSettingsSchema = weightsWithDefaults(DEFAULT_SEARCH_SETTINGS.weights);

/** Re-scores the top fused candidates (src/search/rerank.ts); off by default; per request `rerank: false`. */
export const rerankSettingsSchema = z
  .object({
    enabled: z.boolean().default(false),
    /** `remote`: POST url in the TEI/Cohere/Jina shape; `transformers`: a local cross-encoder under embedding.modelsDir. */
    provider: z.enum(['remote', 'transformers']).default('remote'),
    url: z.string().url().optional(),
    /** From RERANK_API_KEY. */
    apiKey: z.string().min(1).optional(),
    model: z.string().min(1).optional(),
    /** `transformers`: the ONNX file to load (fp32, fp16, q8, q4); default: the first the model folder has, fp32 first. */
    dtype: z.enum(ONNX_DTYPES).optional(),
    topN: z.number().int().min(2).max(200).default(20),
    timeoutMs: z.number().int().min(1).max(60_000).default(1_500),
  })
  .prefault({})
  .refine((rerank) => !rerank.enabled || rerank.provider !== 'remote' || rerank.url !== undefined, {
    message: 'search.rerank with provider "remote" needs url',
    path: ['url'],
  })
  .refine((rerank) => !rerank.enabled || rerank.provider !== 'transformers' || rerank.model !== undefined, {
    message: 'search.rerank with provider "transformers" needs model',
    path: ['model'],
  });

export const searchSettingsSchema = z
  .object({
    mode: z.enum(SEARCH_MODES).default(DEFAULT_SEARCH_SETTINGS.mode),
    topK: z.number().int().min(1).default(DEFAULT_SEARCH_SETTINGS.topK),
    maxTopK: z.number().int().min(1).max(1000).default(DEFAULT_SEARCH_SETTINGS.maxTopK),
    weights: weightsSettingsSchema.prefault({}),
    fusion: fusionMethodSchema.default(DEFAULT_SEARCH_SETTINGS.fusion),
    candidates: z.number().int().min(1).max(10_000).default(DEFAULT_SEARCH_SETTINGS.candidates),
    maxQueryLength: z.number().int().min(1).max(100_000).default(2_000),
    pinned: z.array(z.string()).default([]),
    /**
     * The default cut: a query whose top hit's calibrated score (0–1: how likely the tool answers the query) is below
     * this gets nothing (unless learned usage vouches for a hit shown); an answered query gets its top_k. 0 never
     * abstains. Unset: the embedding model's calibration's own (src/search/calibration.ts, `toolrouter calibrate`). A
     * request's min_score instead drops each hit scoring below it.
     */
    minScore: z.number().min(0).max(1, 'search.minScore is a calibrated score, 0 to 1').optional(),
    /** Longest wait for a query's embedding before the search answers from BM25 alone (and says so). */
    embedTimeoutMs: z.number().int().min(1).max(60_000).default(2_000),
    /** Per-query weights from each signal's evidence (src/search/fusion.ts), scaling the base weights in weighted fusion. */
    adaptive: z
      .object({
        enabled: z.boolean().default(true),
        vectorMargin: z.number().positive().max(1).default(DEFAULT_ADAPTIVE_FUSION.vectorMargin),
        /** BM25's weight scales by min(1, best candidate's query coverage / this); 0 keeps BM25's weight as given. */
        lexicalCoverage: z.number().min(0).max(1).default(DEFAULT_ADAPTIVE_FUSION.lexicalCoverage),
      })
      .prefault({}),
    rerank: rerankSettingsSchema,
    /**
     * When search pays off (src/search/activation.ts): a tool list with more tools than maxTools, or definitions
     * over maxTokens (o200k_base), is searched; a smaller one is shown whole. Used by mcp.search "auto" and by the
     * chat / responses rewriters (below both, a request is forwarded unchanged).
     */
    activation: z
      .object({
        maxTools: z.number().int().min(0).default(DEFAULT_ACTIVATION_THRESHOLDS.maxTools),
        maxTokens: z.number().int().min(0).default(DEFAULT_ACTIVATION_THRESHOLDS.maxTokens),
      })
      .prefault({}),
    lexical: lexicalSettingsSchema,
    hnsw: hnswSettingsSchema,
  })
  .prefault({})
  .refine((search) => search.topK <= search.maxTopK, 'search.topK must not exceed search.maxTopK');

/** The `search` slice as configured (the `SearchSettings` of `SearchService` plus the limits the faces apply). */
export type SearchConfig = z.infer<typeof searchSettingsSchema>;
