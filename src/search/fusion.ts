import type { ScoredName } from '../indexing/lexical.js';

import type { FusionMethod, FusionWeights } from './weights.js';

export type { FusionMethod, FusionWeights } from './weights.js';

export interface FusedResult {
  name: string;
  score: number;
  scores: { bm25?: number; vector?: number; feedback?: number };
}

/** Reciprocal-rank fusion's damping constant; 60 is the value from the original paper and what most engines use. */
export const RRF_K = 60;

/**
 * Combines the two ranked lists. Each signal's raw scores are kept in `scores` (BM25 as scored, cosine similarity
 * for vectors) so callers can show why a tool ranked where it did.
 *
 * - `weighted`: each signal's scores are normalised by their distribution over its candidates, mapping mean ± 3
 *   standard deviations onto [0, 1] (distribution-based score fusion; a score above mean + 3σ is not clipped: clipped,
 *   several top BM25 hits tied at 1 and lost BM25's order, BENCHMARKS.md, issue 33), and the weighted sum is divided by
 *   the weights' sum. The fused score orders; `score` is the calibrated estimate (calibration.ts). A tool a signal did
 *   not return gets 0 from it. BM25 scores are unbounded and cosines bunch together, so raw values are not comparable across signals; spreading each by its own deviation makes
 *   them so, and unlike min-max it does not let one outlier at the top squash every other score (measured against
 *   min-max and max-scaling on MetaTool, LiveMCPBench and the fixture: BENCHMARKS.md).
 * - `rrf`: Σ weight / (RRF_K + rank), which needs no normalisation and ignores score gaps.
 *
 * `feedback` (optional) is the third signal: tools called for similar past queries, scored in [-1, 1] already (a share
 * of the per-tool cap, src/feedback/neighbours.ts), so it is used as is, not spread by its distribution: one neighbour
 * among a handful must stay a small boost. A tool it boosts enters the list even when neither other signal returned it;
 * a negative score only lowers tools already there. It counts in the weights' sum only when it has something to say
 * for this query, so searches without feedback score exactly as before. In `rrf` its positive and negative tools are
 * two rank lists, added and subtracted.
 */
export function fuse(
  lexical: readonly ScoredName[],
  semantic: readonly ScoredName[],
  weights: FusionWeights,
  method: FusionMethod,
  feedback: readonly ScoredName[] = [],
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
  const feedbackWeight = feedback.length > 0 ? (weights.feedback ?? 0) : 0;
  const total = weights.bm25 + weights.vector + feedbackWeight;
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
  if (feedbackWeight > 0) {
    const negative = feedback.filter((hit) => hit.score < 0).reverse();
    for (const hits of [feedback.filter((hit) => hit.score > 0), negative]) {
      hits.forEach((hit, rank) => {
        if (hit.score < 0 && !fused.has(hit.name)) return;
        const result = entry(hit.name);
        result.scores.feedback = hit.score;
        result.score +=
          method === 'weighted'
            ? (feedbackWeight * hit.score) / total
            : (Math.sign(hit.score) * feedbackWeight) / (RRF_K + rank + 1);
      });
    }
    // Never below 0: a tool reported irrelevant sinks to the bottom rather than below it.
    for (const result of fused.values()) if (result.score < 0) result.score = 0;
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || a.name.localeCompare(b.name));
}

/** Per-query fusion: how far each signal is trusted for this query (config `search.adaptive`). */
export interface AdaptiveFusionSettings {
  enabled: boolean;
  /**
   * The vector weight is scaled by min(1, margin / vectorMargin), where margin is how much of the room above the
   * tenth candidate's cosine the first one takes: (c1 − c10) / (1 − c10). A flat top means the model cannot tell the
   * candidates apart for this query, and its spread-normalised scores would only add noise to BM25's ranking.
   */
  vectorMargin: number;
  /**
   * BM25's top candidate is a thin match when its coverage (the share of the query's idf it matched) is below this;
   * f = min(1, coverage / lexicalCoverage), and the BM25 weight gives way by 1 − (1 − f)·t to a vector ranking trusted
   * t (adaptiveWeights). A query whose words the catalog barely has ("will it rain in London tomorrow": one common
   * word matched) still gets a BM25 list spread over [0, 1], and at full weight that thin evidence outvoted a
   * confident vector ranking (issue 42). 0 turns the BM25 side off.
   */
  lexicalCoverage: number;
}

export const DEFAULT_ADAPTIVE_FUSION: AdaptiveFusionSettings = { enabled: true, vectorMargin: 0.3, lexicalCoverage: 0.3 };

/**
 * The weights to fuse this query's lists with: each signal's weight follows its own evidence. The vector weight
 * follows the vector margin (a flat top says nothing; BENCHMARKS.md, "Adaptive fusion"). BM25 gives way for a thin
 * match (its top candidate covers little of the query) only as far as the vector is decisive: BM25's weight is
 * scaled by 1 − (1 − f)·t, with f = min(1, coverage / lexicalCoverage) and t the vector's trust (its margin rule). The
 * issue-42 case ("will it rain in London tomorrow": one common word matched, vector sure of the weather tools) loses
 * BM25's vote; a query where both are thin ("Look up the Yu-Gi-Oh card Dark Magician": names the catalog lacks, a flat
 * vector top) keeps it, since shifting weight to a signal with no evidence either only adds noise (scaled
 * independently, that cost LiveMCPBench 3 of 84 right answers in the top 5; BENCHMARKS.md, "Everyday search").
 * Cosines are relative to the tenth candidate, so the rule does not depend on a model's typical cosine level; with
 * fewer than ten candidates the vector list says too little and is trusted as given. A signal whose base weight is 0
 * was asked away, so the weights stay as given.
 */
export function adaptiveWeights(
  semantic: readonly ScoredName[],
  weights: FusionWeights,
  settings: AdaptiveFusionSettings,
  lexical: readonly ScoredName[] = [],
): FusionWeights {
  if (!settings.enabled || weights.bm25 === 0 || weights.vector === 0) return weights;
  let trust = 1;
  if (semantic.length >= 10) {
    const first = semantic[0]!.score;
    const tenth = semantic[9]!.score;
    const room = 1 - tenth;
    const margin = room > 0 ? (first - tenth) / room : 0;
    trust = Math.min(1, Math.max(0, margin / settings.vectorMargin));
  }
  const vector = weights.vector * trust;
  let bm25 = weights.bm25;
  if (settings.lexicalCoverage > 0 && lexical.length > 0 && semantic.length > 0) {
    // BM25's own top candidate: taking the best coverage of any candidate instead let a long list's stray full match
    // keep the weight up, and cost MRR on LiveMCPBench's agent-style queries.
    const thin = 1 - Math.min(1, (lexical[0]!.coverage ?? 1) / settings.lexicalCoverage);
    bm25 *= 1 - thin * trust;
  }
  if (bm25 + vector <= 0) return weights;
  return bm25 === weights.bm25 && vector === weights.vector ? weights : { ...weights, bm25, vector };
}

export function distributionScale(hits: readonly ScoredName[]): (score: number) => number {
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
  return (score) => Math.max(0, (score - low) / (6 * deviation));
}
