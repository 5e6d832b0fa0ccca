/**
 * Optional second stage: a reranker re-scores the top fused candidates against the query. Two kinds: a remote
 * `POST /rerank` (the shape TEI, Cohere and Jina share) and a cross-encoder run locally through transformers.js.
 * A reranker that fails or is slower than `timeoutMs` changes nothing: the fused order stands.
 */
import { embeddingText, type SearchableText } from '../catalog/text.js';
import type { Tool } from '../catalog/types.js';
import { createCrossEncoder } from '../embedding/cross-encoder.js';
import type { OnnxDtype } from '../embedding/runtime.js';
import type { Metrics } from '../metrics.js';

export interface Reranker {
  /** One relevance score per document, same order; higher is more relevant. */
  score(query: string, documents: string[], signal: AbortSignal): Promise<number[]>;
}

export interface RerankSettings {
  enabled: boolean;
  /** Fused candidates re-scored; the rest keep their fused order below them. */
  topN: number;
  timeoutMs: number;
}

export const DEFAULT_RERANK_SETTINGS: RerankSettings = { enabled: false, topN: 20, timeoutMs: 1_500 };

interface Scored {
  tool: Tool;
  score: number;
  scores: { rerank?: number };
}

/**
 * The candidates with the first topN re-ordered by the reranker's score, which becomes their `score` (and
 * `scores.rerank`): rerank scores and fused scores are on different scales, so the rest keep their fused score and
 * come after. On failure or timeout the input is returned unchanged.
 */
export async function rerankCandidates<T extends Scored>(
  reranker: Reranker,
  query: string,
  candidates: T[],
  settings: RerankSettings,
  textOf: (tool: Tool) => SearchableText | undefined,
  metrics?: Pick<Metrics, 'searchReranks'>,
): Promise<T[]> {
  const head = candidates.slice(0, settings.topN);
  if (head.length < 2) return candidates;
  const documents = head.map((hit) => {
    const text = textOf(hit.tool);
    return text ? embeddingText(text) : `${hit.tool.name} ${hit.tool.description ?? ''}`;
  });
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), settings.timeoutMs);
  });
  try {
    const scores = await Promise.race([reranker.score(query, documents, controller.signal), timeout]);
    if (scores === 'timeout') {
      controller.abort();
      metrics?.searchReranks.inc({ outcome: 'timeout' });
      return candidates;
    }
    if (scores.length !== head.length || !scores.every(Number.isFinite)) throw new Error(`reranker returned ${scores.length} scores for ${head.length} documents`);
    metrics?.searchReranks.inc({ outcome: 'ok' });
    const reranked = head
      .map((hit, i) => ({ ...hit, score: scores[i]!, scores: { ...hit.scores, rerank: scores[i]! } }))
      .sort((a, b) => b.score - a.score);
    return [...reranked, ...candidates.slice(head.length)];
  } catch {
    metrics?.searchReranks.inc({ outcome: 'error' });
    return candidates;
  } finally {
    clearTimeout(timer);
  }
}

export interface RemoteRerankOptions {
  /** The full endpoint, e.g. `http://tei:8080/rerank` or `https://api.cohere.com/v2/rerank`. */
  url: string;
  apiKey?: string;
  /** Sent as `model` (Cohere, Jina need it; TEI ignores it). */
  model?: string;
}

/**
 * `POST /rerank`: TEI takes `{query, texts}` and answers `[{index, score}]`; Cohere and Jina take `{model, query,
 * documents}` and answer `{results: [{index, relevance_score}]}`. Both request fields are sent, both answers read.
 */
export function remoteReranker(options: RemoteRerankOptions): Reranker {
  return {
    async score(query, documents, signal) {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
      const response = await fetch(options.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ query, texts: documents, documents, ...(options.model ? { model: options.model } : {}), return_documents: false }),
        signal,
      });
      if (!response.ok) throw new Error(`rerank server answered ${response.status}`);
      const payload = (await response.json()) as unknown;
      const items = Array.isArray(payload) ? payload : (payload as { results?: unknown })?.results;
      if (!Array.isArray(items)) throw new Error('rerank server answered neither a list nor {results}');
      const scores = new Array<number>(documents.length).fill(Number.NaN);
      for (const item of items as { index?: unknown; score?: unknown; relevance_score?: unknown }[]) {
        const score = item?.score ?? item?.relevance_score;
        if (typeof item?.index === 'number' && item.index >= 0 && item.index < documents.length && typeof score === 'number') scores[item.index] = score;
      }
      return scores;
    },
  };
}

export interface RerankerConfig extends RerankSettings {
  provider: 'remote' | 'transformers';
  url?: string;
  apiKey?: string;
  model?: string;
  /** `transformers`: which ONNX file of the model folder (src/embedding/runtime.ts). */
  dtype?: OnnxDtype;
}

/** The configured reranker; undefined when reranking is off. */
export async function createReranker(
  settings: RerankerConfig,
  models: { modelsDir: string; allowRemoteModels: boolean },
): Promise<Reranker | undefined> {
  if (!settings.enabled) return undefined;
  if (settings.provider === 'remote') {
    if (!settings.url) throw new Error('search.rerank.url is required for the remote reranker');
    return remoteReranker({ url: settings.url, ...(settings.apiKey ? { apiKey: settings.apiKey } : {}), ...(settings.model ? { model: settings.model } : {}) });
  }
  if (!settings.model) throw new Error('search.rerank.model is required for the transformers reranker');
  const encoder = await createCrossEncoder({
    model: settings.model,
    modelsDir: models.modelsDir,
    allowRemoteModels: models.allowRemoteModels,
    ...(settings.dtype ? { dtype: settings.dtype } : {}),
  });
  // A local model cannot be interrupted mid-run; the timeout in rerankCandidates still keeps the fused order.
  return { score: (query, documents) => encoder.score(query, documents) };
}
