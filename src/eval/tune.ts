import type { LabelledQuery } from '../catalog/types.js';
import type { ScoredName } from '../index/lexical.js';
import { adaptiveWeights, fuse, type FusionMethod, type FusionWeights } from '../search/fusion.js';
import { queryEmbedding, semanticCandidates } from '../search/search.js';
import type { Engine } from './engine.js';
import { evaluate, type EvalResult } from './metrics.js';

/** How deep a ranking is scored: MRR@10, Recall@1 and Recall@5 all fit in it. */
export const RANKED_DEPTH = 10;

export interface TuneRow extends EvalResult {
  fusion: FusionMethod;
  weights: FusionWeights;
}

/** Feedback weights tried (on the best bm25/vector setting) when the engine holds feedback. */
export const FEEDBACK_WEIGHTS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.25, 1.5, 2, 3];

/**
 * Grid-searches fusion method and weights. Each query's BM25 and vector candidates are computed once and re-fused
 * per setting, so the grid costs one pass of retrieval whatever its size.
 */
export async function tune(
  engine: Engine,
  queries: readonly LabelledQuery[],
  options: { steps?: number; onProgress?: (done: number, total: number) => void; feedback?: boolean } = {},
): Promise<{ rows: TuneRow[]; best: TuneRow }> {
  const steps = options.steps ?? 10;
  const candidates = engine.config.search.candidates;
  // With `feedback`, the search's feedback signal (replayed events) is computed once per query too.
  const feedbackSignal = options.feedback ? engine.search.feedback : undefined;
  const signals = new Map<string, { lexical: ScoredName[]; semantic: ScoredName[]; feedback: ScoredName[] }>();
  for (const [done, { query }] of queries.entries()) {
    if (signals.has(query)) continue;
    const semantic = await semanticCandidates(engine.index, engine.embedder, query, candidates);
    const vector = feedbackSignal ? await queryEmbedding(engine.embedder, query) : undefined;
    const feedback = vector ? feedbackSignal!.boosts(vector) : [];
    signals.set(query, { lexical: engine.index.lexical.search(query, candidates), semantic, feedback });
    options.onProgress?.(done + 1, queries.length);
  }
  // The grid's weights are base weights, adapted per query as search adapts them (search.adaptive).
  const adaptive = engine.config.search.adaptive;
  const perQuery = (semantic: ScoredName[], weights: FusionWeights, fusion: FusionMethod) =>
    fusion === 'weighted' ? adaptiveWeights(semantic, weights, adaptive) : weights;
  const rows: TuneRow[] = [];
  for (const fusion of ['weighted', 'rrf'] as const) {
    for (let step = 0; step <= steps; step++) {
      const bm25 = round(step / steps);
      const weights = { bm25, vector: round(1 - bm25) };
      const rank = (query: string) => {
        const { lexical, semantic } = signals.get(query)!;
        // Same depth as `eval` ranks to, so both commands report the same MRR for the same setting.
        return fuse(lexical, semantic, perQuery(semantic, weights, fusion), fusion)
          .slice(0, RANKED_DEPTH)
          .map((hit) => hit.name);
      };
      rows.push({ fusion, weights, ...(await evaluate(rank, queries)) });
    }
  }
  // MRR decides: it rewards the right tool at the top, which is what an agent reading top-k needs most.
  const pick = (among: TuneRow[]) => among.reduce((a, b) => (b.mrr > a.mrr + 1e-12 ? b : a));
  let best = pick(rows);
  if (feedbackSignal) {
    // The feedback weight is searched on top of the best split: the signals are nearly independent, and a full
    // three-way grid would cost a dozen times more for the same answer.
    const feedbackRows: TuneRow[] = [];
    for (const feedback of FEEDBACK_WEIGHTS) {
      const weights = { ...best.weights, feedback };
      const rank = (query: string) => {
        const signal = signals.get(query)!;
        return fuse(signal.lexical, signal.semantic, perQuery(signal.semantic, weights, best.fusion), best.fusion, signal.feedback)
          .slice(0, RANKED_DEPTH)
          .map((hit) => hit.name);
      };
      feedbackRows.push({ fusion: best.fusion, weights, ...(await evaluate(rank, queries)) });
    }
    rows.push(...feedbackRows);
    best = pick(feedbackRows);
  }
  return { rows, best };
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}
