import type { LabelledQuery } from '../catalog/types.js';
import type { FusionMethod, FusionWeights } from '../search/fusion.js';
import { FUSION_METHODS } from '../search/weights.js';
import type { PreparedSearch, SearchService } from '../search/search.js';
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
 * Grid-searches fusion method and weights. Each query's candidates are retrieved once (`SearchService.prepare`) and
 * ranked per setting by the service itself, so the grid costs one pass of retrieval whatever its size, and each row
 * scores exactly the ranking `/v1/tools/search` returns with that row's weights and fusion: pinned tools left out,
 * adaptive weights, the configured feedback weight for a row that names none. The reranker is left out (it would be a
 * remote call per query and setting), so with reranking on the rows rank what goes into it.
 */
export async function tune(
  engine: { search: SearchService },
  queries: readonly LabelledQuery[],
  options: { steps?: number; onProgress?: (done: number, total: number) => void; feedback?: boolean } = {},
): Promise<{ rows: TuneRow[]; best: TuneRow }> {
  const steps = options.steps ?? 10;
  const { search } = engine;
  const prepared = new Map<string, PreparedSearch>();
  for (const [done, { query }] of queries.entries()) {
    if (prepared.has(query)) continue;
    prepared.set(query, await search.prepare({ query, mode: 'hybrid', rerank: false }));
    options.onProgress?.(done + 1, queries.length);
  }
  const scoreSetting = async (fusion: FusionMethod, weights: FusionWeights): Promise<TuneRow> => {
    // Same depth as `eval` ranks to, so both commands report the same MRR for the same setting.
    const rank = async (query: string) =>
      (await prepared.get(query)!.rank({ weights, fusion, topK: RANKED_DEPTH })).results.map((hit) => hit.tool.name);
    return { fusion, weights, ...(await evaluate(rank, queries)) };
  };
  const rows: TuneRow[] = [];
  for (const fusion of FUSION_METHODS) {
    for (let step = 0; step <= steps; step++) {
      const bm25 = round(step / steps);
      rows.push(await scoreSetting(fusion, { bm25, vector: round(1 - bm25) }));
    }
  }
  // MRR decides: it rewards the right tool at the top, which is what an agent reading top-k needs most.
  const pick = (among: TuneRow[]) => among.reduce((a, b) => (b.mrr > a.mrr + 1e-12 ? b : a));
  let best = pick(rows);
  if (options.feedback && search.feedback) {
    // The feedback weight is searched on top of the best split: the signals are nearly independent, and a full
    // three-way grid would cost a dozen times more for the same answer.
    const feedbackRows: TuneRow[] = [];
    for (const feedback of FEEDBACK_WEIGHTS) feedbackRows.push(await scoreSetting(best.fusion, { ...best.weights, feedback }));
    rows.push(...feedbackRows);
    best = pick(feedbackRows);
  }
  return { rows, best };
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}
