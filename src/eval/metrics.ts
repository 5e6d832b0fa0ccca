/**
 * Retrieval metrics for labelled tool queries, and a plain-text table for printing them side by side.
 */
import type { LabelledQuery } from '../catalog/types.js';

export type Ranker = (query: string) => Promise<string[]> | string[];

export interface EvalOptions {
  /** Depth of the extra `recallAtK` column (default 10); Recall@1 and Recall@5 are always reported. */
  k?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface EvalResult {
  /** Number of queries scored. */
  n: number;
  /** Depth used for `recallAtK`. */
  k: number;
  recallAt1: number;
  recallAt5: number;
  recallAtK: number;
  mrr: number;
}

/**
 * Scores a ranker over labelled queries.
 *
 * Recall@k is the fraction of queries with at least one expected name in the top k results. With a single expected
 * tool per query this is the "hit rate" (HR@k) that tool-retrieval papers (MetaTool, ToolRet, LiveMCPBench-style
 * evaluations) call Recall@k; with several expected names it is any-hit, which is what a router needs: one right
 * tool in the answer is enough for the agent to proceed.
 *
 * MRR is the mean over queries of 1/rank of the first expected name in the returned list (0 when none appears). It
 * is computed over the whole list the ranker returns, so rankers should return at least 10 names for MRR to mean
 * MRR@10 or better. A name repeated in the list counts at its first position.
 *
 * Queries are ranked one at a time: rankers may hold a single model session and throughput is not measured here.
 */
export async function evaluate(
  rank: Ranker,
  queries: readonly LabelledQuery[],
  opts: EvalOptions = {},
): Promise<EvalResult> {
  const k = opts.k ?? 10;
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`k must be a positive integer, got ${k}`);
  let hits1 = 0;
  let hits5 = 0;
  let hitsK = 0;
  let reciprocal = 0;
  for (const [index, labelled] of queries.entries()) {
    if (labelled.expected.length === 0) {
      // An unlabelled query would silently count as a miss and drag every ranker down equally: refuse instead.
      throw new Error(`query ${index} ("${labelled.query.slice(0, 60)}") has no expected tool names`);
    }
    const ranked = await rank(labelled.query);
    const expected = new Set(labelled.expected);
    const position = ranked.findIndex((name) => expected.has(name));
    if (position >= 0) {
      if (position < 1) hits1 += 1;
      if (position < 5) hits5 += 1;
      if (position < k) hitsK += 1;
      reciprocal += 1 / (position + 1);
    }
    opts.onProgress?.(index + 1, queries.length);
  }
  const n = queries.length;
  const ratio = (x: number): number => (n === 0 ? 0 : x / n);
  return { n, k, recallAt1: ratio(hits1), recallAt5: ratio(hits5), recallAtK: ratio(hitsK), mrr: ratio(reciprocal) };
}

export type TableRow = { label: string } & Record<string, string | number | undefined>;

const HEADERS: Record<string, string> = {
  n: 'n',
  recallAt1: 'Recall@1',
  recallAt5: 'Recall@5',
  mrr: 'MRR',
};

/** Rates print with fixed decimals even when whole (a perfect 1 must line up with 0.875 in the same column). */
const RATE_KEY = /^(recall|mrr|precision|ndcg|hit|map)/i;

function formatCell(key: string, value: string | number | undefined): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  return Number.isInteger(value) && !RATE_KEY.test(key) ? String(value) : value.toFixed(3);
}

/**
 * Aligned plain-text table: label column left-aligned, then one column per key found in the rows (in first-seen
 * order) right-aligned. Rates (Recall, MRR, ...) and other fractional numbers print with three decimals, counts as
 * integers.
 * `recallAtK` is headed `Recall@<k>` using the row's `k`, and `k` itself is not printed when that header carries it.
 */
export function formatTable(rows: readonly TableRow[]): string {
  const keys: string[] = [];
  for (const row of rows) for (const key of Object.keys(row)) if (key !== 'label' && !keys.includes(key)) keys.push(key);
  const ks = new Set(rows.map((row) => row.k));
  const kInHeader = keys.includes('recallAtK') && ks.size === 1;
  const columns = keys.filter((key) => !(key === 'k' && kInHeader));
  const header = (key: string): string =>
    key === 'recallAtK' && kInHeader ? `Recall@${String([...ks][0])}` : (HEADERS[key] ?? key);

  const table = [
    ['', ...columns.map(header)],
    ...rows.map((row) => [row.label, ...columns.map((key) => formatCell(key, row[key]))]),
  ];
  const widths = table[0]!.map((_, c) => Math.max(...table.map((line) => line[c]!.length)));
  const render = (line: string[]): string =>
    line.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ').trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [render(table[0]!), rule, ...table.slice(1).map(render)].join('\n');
}
