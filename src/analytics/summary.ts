import type { SearchRecord } from './types.js';

/** Misses and tools listed in a summary at most. */
export const SUMMARY_LIST = 20;
/** Unused tools listed at most (the count says how many there are). */
export const MAX_UNUSED = 100;

export interface SearchSummary {
  searches: number;
  /** A tool from the results was then called. */
  answered: number;
  /** Nothing was found (min_score turned every candidate away). */
  abstained: number;
  /** Something was found but none of it was called (so far: `waiting` of them are still within the window). */
  unanswered: number;
  /** Unanswered searches still within the window, which a call may yet answer. */
  waiting: number;
  /** Queries that found nothing, or that nothing came of within the window; most frequent first (equal queries, or equal hashes, grouped). */
  misses: { query: string; count: number }[];
  /** Tools called after searches, most first. */
  top_tools: { name: string; count: number }[];
  /** Tools of the catalog (as the reader sees it) that no search in the period returned, by name. */
  unused_tools: string[];
  /** How many tools no search returned (`unused_tools` lists at most MAX_UNUSED). */
  unused_count: number;
}

/** What the summary route answers, over the records the reader may see since a time. */
export function summarise(records: readonly SearchRecord[], catalogTools: readonly string[], options: { now: number; windowMs: number }): SearchSummary {
  let answered = 0;
  let abstained = 0;
  let waiting = 0;
  const misses = new Map<string, number>();
  const called = new Map<string, number>();
  const found = new Set<string>();
  for (const record of records) {
    for (const result of record.results) found.add(result.name);
    if (record.called !== undefined) {
      answered++;
      called.set(record.called, (called.get(record.called) ?? 0) + 1);
      continue;
    }
    if (record.abstained) abstained++;
    else if (record.time + options.windowMs > options.now) {
      // Not a miss yet: a call may still answer it.
      waiting++;
      continue;
    }
    // Queries kept as nothing (analytics.queries off) cannot be grouped.
    if (record.query !== '') misses.set(record.query, (misses.get(record.query) ?? 0) + 1);
  }
  const unused = catalogTools.filter((name) => !found.has(name)).sort();
  return {
    searches: records.length,
    answered,
    abstained,
    unanswered: records.length - answered - abstained,
    waiting,
    misses: top(misses).map(([query, count]) => ({ query, count })),
    top_tools: top(called).map(([name, count]) => ({ name, count })),
    unused_tools: unused.slice(0, MAX_UNUSED),
    unused_count: unused.length,
  };
}

function top(counts: Map<string, number>): [string, number][] {
  return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, SUMMARY_LIST);
}

/** One traffic label: an answered search's query and the tool called from its results. */
export interface TrafficLabel {
  query: string;
  expected: [string];
  time: number;
}

/**
 * The labels traffic gives: each answered search (its query kept in full) labelled by the tool called from its results,
 * newest first. Searches by name (`select:`) or pattern (`regex:`) say nothing about what words mean and are left out.
 */
export function trafficLabels(records: readonly SearchRecord[]): TrafficLabel[] {
  return records.flatMap((record) =>
    record.called !== undefined && record.query !== '' && !/^\s*(select|regex):/i.test(record.query) && !record.query.startsWith('sha256:')
      ? [{ query: record.query, expected: [record.called] as [string], time: record.time }]
      : [],
  );
}
