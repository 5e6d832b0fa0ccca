import { createHash } from 'node:crypto';

/**
 * The search log's records (src/analytics): one per search on any surface, with what came of it. Kept apart from the
 * store and the log so the routes, the summary and the stores share one shape.
 */

/** Where a search came from; the `surface` label of toolrouter_search_outcomes_total and a filter of the log. */
export const SEARCH_SURFACES = ['mcp', 'mcp_list', 'code', 'rest', 'proxy', 'proxy_search'] as const;
export type SearchSurface = (typeof SEARCH_SURFACES)[number];

/** What came of a search: a tool from its results was called, nothing within the window, or it found nothing. */
export type SearchOutcome = 'answered' | 'unanswered' | 'abstained';

/** How queries are kept: as typed, as a SHA-256 (equal queries still group), or not at all. */
export type QueryMode = 'full' | 'hash' | 'off';

export interface SearchRecord {
  /** Unique id (a UUID). */
  id: string;
  /** Milliseconds since the epoch. */
  time: number;
  surface: SearchSurface;
  /** The caller's key id; absent for the admin and open callers. Never a secret. */
  key?: string;
  /** The query per analytics.queries: the text, `sha256:<hex>`, or '' when queries are off. */
  query: string;
  /** The results returned, best first (at most the search's top_k). */
  results: { name: string; score: number }[];
  /** How many tools matched at or above min_score (ranked modes); the result count otherwise. */
  matched: number;
  /** The search answered with nothing (min_score turned every candidate away, or nothing matched at all). */
  abstained: boolean;
  /** Milliseconds the search took. */
  ms: number;
  /** The tool then called from the results, as feedback credits it (src/mcp/gateway/feedback-capture.ts, src/chat/core/feedback-capture.ts). */
  called?: string;
}

export interface AnalyticsSettings {
  /** false: no search is recorded and the analytics routes answer 404. */
  enabled: boolean;
  /** `full` keeps the query text; `hash` a SHA-256 of it (misses still group, nobody reads them); `off` nothing. */
  queries: QueryMode;
  /** Searches kept, newest first; older ones are dropped. */
  maxEntries: number;
  /** Searches older than this are dropped whatever their number. */
  maxAgeDays: number;
}

export const DEFAULT_ANALYTICS_SETTINGS: AnalyticsSettings = {
  enabled: true,
  queries: 'full',
  // A record is a few hundred bytes: 10,000 of them are a few MB in Redis, and the summary reads them all.
  maxEntries: 10_000,
  maxAgeDays: 30,
};

export const DAY_MS = 24 * 3600 * 1000;

/** A query's `sha256:<hex>` form (of the trimmed text), as hash mode logs it; a query already in that form is kept. */
export function hashedQuery(query: string): string {
  const text = query.trim();
  if (isHashedQuery(text)) return text;
  return `sha256:${createHash('sha256').update(text).digest('hex')}`;
}

export function isHashedQuery(query: string): boolean {
  return /^sha256:[0-9a-f]{64}$/.test(query);
}

/** The latest time a JavaScript Date holds (ms since the epoch); a later `since` has no ISO form. */
const LATEST_TIME = 8.64e15;

/**
 * A `since` given to an analytics route, as milliseconds since the epoch: an ISO 8601 time or a whole number of
 * milliseconds. Undefined when it is neither, or outside what a Date holds (so every route refuses the same values).
 */
export function parseSince(value: string | number): number | undefined {
  const time = typeof value === 'number' ? value : /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(time) || time < 0 || time > LATEST_TIME) return undefined;
  return time;
}

/** The message a bad `since` gets, the same on every route. */
export const SINCE_MESSAGE = 'must be an ISO 8601 time (2026-11-27T10:00:00Z) or milliseconds since the epoch, up to 8640000000000000';
