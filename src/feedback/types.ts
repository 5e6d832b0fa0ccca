/**
 * One piece of usage evidence: for this query, this tool was (or, told explicitly, was not) the one wanted.
 * `scope` is who it came from (an API key id; '' when the request had none); with `isolation: key` only events of
 * the searching caller's scope count.
 */
export interface FeedbackEvent {
  /** Unique, so two identical events stay two events in a store that holds sets. */
  id: string;
  query: string;
  /** The query's embedding under `model`, L2-normalised. */
  embedding: Float32Array;
  model: string;
  tool: string;
  relevant: boolean;
  /** Milliseconds since the epoch. */
  time: number;
  scope: string;
}

/** Where an event came from (a label of the events metric). */
export type FeedbackSurface = 'rest' | 'mcp' | 'chat' | 'replay';

export interface FeedbackSettings {
  enabled: boolean;
  /** Fusion weight of the feedback signal (next to search.weights.bm25 and .vector); 0 records without boosting. */
  weight: number;
  /** `global`: every caller's events boost everyone's searches; `key`: only the searching caller's own. */
  isolation: 'global' | 'key';
  /** An event's weight halves every this many days. */
  halfLifeDays: number;
  /** Events kept, newest first; older ones are forgotten. */
  maxEvents: number;
  /** Events older than this are forgotten whatever their number. */
  maxAgeDays: number;
  /** Recorded queries consulted per search: the nearest ones above minSimilarity. */
  neighbours: number;
  /** Cosine below which a recorded query says nothing about this one. */
  minSimilarity: number;
  /** Largest boost (Σ similarity × decay) one tool can get; boosts are reported as a share of it, in [-1, 1]. */
  maxBoost: number;
}

export const DEFAULT_FEEDBACK_SETTINGS: FeedbackSettings = {
  enabled: true,
  // Measured (BENCHMARKS.md, Feedback): MetaTool gains whether 50%, 5% or 1% of its queries were replayed; a higher
  // weight or a lower cap gains more on dense feedback but starts costing on unrelated feedback (LiveMCPBench).
  weight: 0.75,
  isolation: 'global',
  halfLifeDays: 30,
  // The scan costs about 0.1 ms per 1,000 events (BENCHMARKS.md, Feedback); raise it for more memory of usage.
  maxEvents: 10_000,
  maxAgeDays: 365,
  neighbours: 10,
  minSimilarity: 0.6,
  maxBoost: 4,
};

export const DAY_MS = 24 * 3600 * 1000;
