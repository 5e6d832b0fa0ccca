import type { LabelledQuery } from '../catalog/types.js';
import type { FeedbackRecorder } from '../feedback/service.js';

/**
 * Replays labelled queries as usage: each query's expected tools become events, as if an agent had searched with it
 * and called them. Names the catalog lacks are skipped (they could never be boosted). Returns the events recorded.
 */
export async function replayFeedback(
  feedback: FeedbackRecorder,
  queries: readonly LabelledQuery[],
  known: (name: string) => boolean,
  onProgress?: (done: number, total: number) => void,
): Promise<number> {
  let recorded = 0;
  for (const [done, { query, expected }] of queries.entries()) {
    for (const tool of new Set(expected)) {
      if (!known(tool)) continue;
      await feedback.record({ query, tool, relevant: true, surface: 'replay' });
      recorded++;
    }
    onProgress?.(done + 1, queries.length);
  }
  return recorded;
}

/**
 * Splits labelled queries for a feedback experiment: every other query (0th, 2nd, ...) is replayed as feedback, the
 * rest evaluated, so both halves cover the same tools in the same proportions and no query is in both.
 */
export function splitForFeedback<T>(queries: readonly T[]): { feedback: T[]; evaluation: T[] } {
  return { feedback: queries.filter((_q, i) => i % 2 === 0), evaluation: queries.filter((_q, i) => i % 2 === 1) };
}
