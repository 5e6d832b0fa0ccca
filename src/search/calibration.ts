/**
 * Calibrated relevance: a search hit's `score` as an estimate in [0, 1] that the tool answers the query, the same
 * scale for every query and every mode (hybrid, BM25 alone or as the embeddings fallback, vector). Fused scores are
 * normalised per query, so a query nothing answers scores about as high as one that is answered; a raw BM25 score grows
 * with the query's length. The estimate instead reads signals that mean the same across queries (the share of the
 * query BM25 matched, absolute cosine, how far a hit leads the next) through a logistic model per mode, fitted by
 * `toolrouter calibrate` on catalogs with half their servers removed (BENCHMARKS.md, "Calibrated scores").
 */
import type { ScoredName } from '../indexing/lexical.js';
import { OFFLINE_MODEL_ID } from '../embedding/offline/options.js';

/** The signals one hit is judged by. Signals a mode does not have are 0. */
export interface RelevanceFeatures {
  /** Share of the query's idf BM25 matched in this tool (0–1). */
  coverage: number;
  /** BM25 score over the query's best BM25 score. */
  bm25Relative: number;
  /** log(1 + raw BM25). */
  bm25Log: number;
  /** Cosine between query and tool (absolute; 0 when the vector signal did not return it). */
  cosine: number;
  /** Cosine above the tenth candidate's, over the room above it: (c − c10) / (1 − c10). */
  cosineMargin: number;
  /** The ranking score (fused, or the one signal's distribution-normalised score). */
  ranking: number;
  /** How far this hit's ranking score leads the next one's. */
  lead: number;
  /** 1 / (1 + rank). */
  reciprocalRank: number;
  /**
   * The feedback signal's score for this tool (−1 to 1; 0 without feedback): tools called for queries like this one.
   * Learned usage is evidence the tool answers, so it enters the estimate as well as the ranking; without it a learned
   * tool ranked second scored as if nothing had been learned and the default min_score dropped it (issue 42).
   */
  feedback: number;
}

export const FEATURE_NAMES = [
  'coverage',
  'bm25Relative',
  'bm25Log',
  'cosine',
  'cosineMargin',
  'ranking',
  'lead',
  'reciprocalRank',
  'feedback',
] as const;

export type CalibrationMode = 'hybrid' | 'bm25' | 'vector';

/** A fitted logistic model: score = σ(intercept + Σ weight · feature). */
export interface CalibrationModel {
  intercept: number;
  weights: Record<(typeof FEATURE_NAMES)[number], number>;
}

/** Which features each mode's model reads: a mode without vectors has no cosine to read. */
export const MODE_FEATURES: Record<CalibrationMode, readonly (typeof FEATURE_NAMES)[number][]> = {
  hybrid: FEATURE_NAMES,
  // Feedback is fused in hybrid mode only, so only the hybrid model reads it.
  bm25: ['coverage', 'bm25Relative', 'bm25Log', 'ranking', 'lead', 'reciprocalRank'],
  vector: ['cosine', 'cosineMargin', 'ranking', 'lead', 'reciprocalRank'],
};

/**
 * The shipped models, as `toolrouter calibrate` prints them: fitted on the first abstention split of the fixture,
 * LiveMCPBench (hand-written and agent-style queries), the everyday requests and MetaTool (half of each catalog's
 * servers removed; each set weighs the same), reported on the second and checked the other way round (BENCHMARKS.md).
 * The hybrid model's feedback weight is fitted on MetaTool and the fixture with half their queries replayed as usage.
 * No weight is negative (fitModel), so a hit with less evidence never scores above one with more. Refit when a signal
 * changes (fields, fusion, the model).
 */
export const DEFAULT_CALIBRATION: Record<CalibrationMode, CalibrationModel> = {
  hybrid: {
    intercept: -3.6363,
    weights: { coverage: 1.8998, bm25Relative: 0, bm25Log: 0.4403, cosine: 0.4789, cosineMargin: 3.7016, ranking: 0, lead: 0.2894, reciprocalRank: 0, feedback: 2.84 },
  },
  bm25: {
    intercept: -5.5654,
    weights: { coverage: 2.5006, bm25Relative: 0, bm25Log: 1.1548, cosine: 0, cosineMargin: 0, ranking: 0, lead: 0.2808, reciprocalRank: 0, feedback: 0 },
  },
  vector: {
    intercept: -4.148,
    weights: { coverage: 0, bm25Relative: 0, bm25Log: 0, cosine: 1.7671, cosineMargin: 5.9061, ranking: 0.2907, lead: 0, reciprocalRank: 0, feedback: 0 },
  },
};

/**
 * What a calibration is fitted for one embedding model: the models per mode, and the default min_score that goes with
 * them. Absolute cosines are the model's own (the offline model's right answers sit near 0.3, a sentence-transformer's
 * near 0.7), so a model fitted on one embedding model's cosines misjudges another's; each model gets its own entry
 * (`toolrouter calibrate` prints it for the configured model), and a model without one gets GENERIC_CALIBRATION.
 */
export interface Calibration {
  models: Record<CalibrationMode, CalibrationModel>;
  /**
   * The default min_score (`search.minScore` when unset): the highest threshold that, on the split it was fitted on,
   * costs at most a quarter point of R@5 on every labelled set (src/eval/calibrate.ts, thresholdWithinLoss), so it
   * abstains as much as keeping right answers allows. Compared with the query's answer (`answers`), not each hit.
   */
  minScore: number;
}

/**
 * Features that mean the same whatever the embedding model: BM25's, the cosine relative to the query's tenth
 * candidate, the ranking's lead. The absolute cosine is left out.
 */
export const GENERIC_FEATURES: Record<CalibrationMode, readonly (typeof FEATURE_NAMES)[number][]> = {
  hybrid: MODE_FEATURES.hybrid.filter((name) => name !== 'cosine'),
  bm25: MODE_FEATURES.bm25,
  vector: MODE_FEATURES.vector.filter((name) => name !== 'cosine'),
};

/** The offline model's calibration: DEFAULT_CALIBRATION with its min_score (BENCHMARKS.md, "Calibrated scores"). */
export const OFFLINE_CALIBRATION: Calibration = { models: DEFAULT_CALIBRATION, minScore: 0.065 };

/**
 * For an embedding model no calibration was fitted for: models reading only GENERIC_FEATURES, fitted on the offline
 * model's data like the others (the BM25 model is the same: BM25 does not depend on the embedding model), with a
 * min_score chosen the same way (measured on the offline model's held-out halves, BENCHMARKS.md; no second embedding
 * model could be measured). `toolrouter calibrate` with the model configured prints its own.
 */
export const GENERIC_CALIBRATION: Calibration = {
  models: {
    hybrid: {
      intercept: -3.519,
      weights: { coverage: 1.8348, bm25Relative: 0, bm25Log: 0.4622, cosine: 0, cosineMargin: 4.0755, ranking: 0, lead: 0.2523, reciprocalRank: 0, feedback: 2.8836 },
    },
    bm25: DEFAULT_CALIBRATION.bm25,
    vector: {
      intercept: -3.2483,
      weights: { coverage: 0, bm25Relative: 0, bm25Log: 0, cosine: 0, cosineMargin: 6.9097, ranking: 0.1153, lead: 0, reciprocalRank: 0, feedback: 0 },
    },
  },
  minScore: 0.07,
};

/** Calibrations by embedding model id. */
export const CALIBRATIONS: Readonly<Record<string, Calibration>> = { [OFFLINE_MODEL_ID]: OFFLINE_CALIBRATION };

/** The calibration for the model an index was built with: its own, or the generic one. */
export function calibrationFor(model: string | null | undefined): Calibration {
  return (model ? CALIBRATIONS[model] : undefined) ?? GENERIC_CALIBRATION;
}

/**
 * Whether a ranking answers its query at `minScore`: what the cut compares. Abstaining is a judgement on the query
 * (is anything here an answer?), and the best estimate of that is the top hit's score. Cutting each hit at the
 * threshold instead dropped right answers ranked 2–5, whose own estimates are low because the ranking put something
 * else first (issue 48: MetaTool R@5 0.690 → 0.663 at the default). Learned usage among the hits shown also answers
 * it: a query like this one was answered by that tool before, so abstaining would contradict recorded evidence (a
 * learned tool ranked second was hidden behind a weak top hit).
 */
export function answers(scores: readonly number[], feedback: readonly (number | undefined)[], minScore: number): boolean {
  return (scores[0] ?? 0) >= minScore || feedback.some((value) => (value ?? 0) > 0);
}

export function relevance(features: RelevanceFeatures, model: CalibrationModel): number {
  let z = model.intercept;
  for (const name of FEATURE_NAMES) z += model.weights[name] * features[name];
  return 1 / (1 + Math.exp(-z));
}

/**
 * Each ranked hit's features, from the signals' candidate lists and the ranking made of them (best first). Query-level
 * context (the best BM25 score, the tenth cosine) comes from the full candidate lists, not from what a caller may see.
 */
export function rankedFeatures(
  ranked: readonly { name: string; score: number; scores?: { feedback?: number } }[],
  lexical: readonly ScoredName[],
  semantic: readonly ScoredName[],
): RelevanceFeatures[] {
  const lexicalByName = new Map(lexical.map((hit) => [hit.name, hit]));
  const cosineByName = new Map(semantic.map((hit) => [hit.name, hit.score]));
  const topBm25 = lexical[0]?.score ?? 0;
  const tenth = semantic.length === 0 ? 0 : semantic[Math.min(9, semantic.length - 1)]!.score;
  const room = 1 - tenth;
  return ranked.map((hit, rank) => {
    const bm25 = lexicalByName.get(hit.name);
    const cosine = cosineByName.get(hit.name);
    const next = ranked[rank + 1]?.score ?? 0;
    return {
      coverage: bm25?.coverage ?? 0,
      bm25Relative: bm25 && topBm25 > 0 ? bm25.score / topBm25 : 0,
      bm25Log: bm25 ? Math.log1p(bm25.score) : 0,
      cosine: cosine ?? 0,
      cosineMargin: cosine !== undefined && room > 0 ? Math.max(0, (cosine - tenth) / room) : 0,
      ranking: hit.score,
      lead: Math.max(0, hit.score - next),
      reciprocalRank: 1 / (1 + rank),
      feedback: hit.scores?.feedback ?? 0,
    };
  });
}

/**
 * Calibrated scores for a ranking, best first. Never above the hit ranked before: the order is the ranking's, and a
 * relevance estimate that rose down the list would say the ranking is wrong without changing it.
 */
export function calibratedScores(features: readonly RelevanceFeatures[], model: CalibrationModel): number[] {
  const scores: number[] = [];
  let ceiling = 1;
  for (const hit of features) {
    ceiling = Math.min(ceiling, relevance(hit, model));
    scores.push(ceiling);
  }
  return scores;
}
