import type { ScoredName } from '../index/lexical.js';

export interface FusionWeights {
  bm25: number;
  vector: number;
}

export type FusionMethod = 'weighted' | 'rrf';

export interface FusedResult {
  name: string;
  score: number;
  scores: { bm25?: number; vector?: number };
}

/** Reciprocal-rank fusion's damping constant; 60 is the value from the original paper and what most engines use. */
export const RRF_K = 60;

/**
 * Combines the two ranked lists. Each signal's raw scores are kept in `scores` (BM25 as scored, cosine similarity
 * for vectors) so callers can show why a tool ranked where it did.
 *
 * - `weighted`: each signal's scores are normalised by their distribution over its candidates, mapping mean ± 3
 *   standard deviations onto [0, 1] (distribution-based score fusion), and the weighted sum is divided by the weights'
 *   sum, so fused scores stay in [0, 1]. A tool a signal did not return gets 0 from it. BM25 scores are unbounded and
 *   cosines bunch together, so raw values are not comparable across signals; spreading each by its own deviation makes
 *   them so, and unlike min-max it does not let one outlier at the top squash every other score (measured against
 *   min-max and max-scaling on MetaTool, LiveMCPBench and the fixture: BENCHMARKS.md).
 * - `rrf`: Σ weight / (RRF_K + rank), which needs no normalisation and ignores score gaps.
 */
export function fuse(
  lexical: readonly ScoredName[],
  semantic: readonly ScoredName[],
  weights: FusionWeights,
  method: FusionMethod,
): FusedResult[] {
  const fused = new Map<string, FusedResult>();
  const entry = (name: string): FusedResult => {
    let result = fused.get(name);
    if (!result) {
      result = { name, score: 0, scores: {} };
      fused.set(name, result);
    }
    return result;
  };
  const total = weights.bm25 + weights.vector;
  const contributions = [
    { hits: lexical, weight: weights.bm25, signal: 'bm25' as const },
    { hits: semantic, weight: weights.vector, signal: 'vector' as const },
  ];
  for (const { hits, weight, signal } of contributions) {
    const normalise = method === 'weighted' ? distributionScale(hits) : undefined;
    hits.forEach((hit, rank) => {
      const result = entry(hit.name);
      result.scores[signal] = hit.score;
      result.score +=
        method === 'weighted' ? (weight * normalise!(hit.score)) / total : weight / (RRF_K + rank + 1);
    });
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || a.name.localeCompare(b.name));
}

function distributionScale(hits: readonly ScoredName[]): (score: number) => number {
  if (hits.length === 0) return () => 0;
  let sum = 0;
  for (const { score } of hits) sum += score;
  const mean = sum / hits.length;
  let squares = 0;
  for (const { score } of hits) squares += (score - mean) ** 2;
  const deviation = Math.sqrt(squares / hits.length);
  // A single candidate, or all tied: they are all as good as this signal can tell.
  if (!(deviation > 0)) return () => 1;
  const low = mean - 3 * deviation;
  return (score) => Math.min(1, Math.max(0, (score - low) / (6 * deviation)));
}
