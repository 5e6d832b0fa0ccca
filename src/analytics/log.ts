import { createHash, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import type { SearchObserver } from '../search/search.js';
import type { SearchLogStore } from './store.js';
import { hashedQuery, SEARCH_SURFACES, type AnalyticsSettings, type SearchOutcome, type SearchRecord, type SearchSurface } from './types.js';

/**
 * How long a search waits for its call: the MCP gateway's search ids live as long (SEARCH_ID_TTL_MS), and an agent
 * calls what it found within a step or two.
 */
export const OUTCOME_WINDOW_MS = 10 * 60_000;
/** Results recorded per search: a search's top_k is usually 5, and the log must stay small per entry. */
export const MAX_RECORDED_RESULTS = 20;
/** Longest query text recorded (characters); longer ones are cut. */
export const MAX_RECORDED_QUERY = 1_000;

export interface SearchLogOptions {
  settings: AnalyticsSettings;
  store: SearchLogStore;
  log?: Logger;
  metrics?: Pick<Metrics, 'searchOutcomes' | 'searchLogDropped'>;
  /** How long a search may wait for a call of a tool it found before it counts as unanswered. @defaultValue OUTCOME_WINDOW_MS */
  windowMs?: number;
  /** Writes waiting for the store at most; past it new ones are dropped (and counted), never waited for. @defaultValue 1000 */
  maxQueued?: number;
  /** Searches this instance watches for the unanswered count at most (oldest forgotten first). @defaultValue 10000 */
  maxWatched?: number;
  now?: () => number;
}

/** What a credit names: as feedback records it (query, tool, the caller's key). */
export interface Credit {
  query: string;
  tool: string;
  scope: string | undefined;
}

/**
 * The search log: every search a face marks (`observe`), and what came of it. Recording never fails or slows a
 * search: each write joins a bounded queue that one loop drains into the store; when the queue is full or the store
 * fails the write is dropped, logged and counted. Outcomes are counted in toolrouter_search_outcomes_total as they
 * become known: abstained when the search answers, answered when a call is credited to it, unanswered once the window
 * has passed without one (for the searches this instance recorded).
 */
export class SearchLog implements SearchObserver {
  readonly settings: AnalyticsSettings;
  readonly windowMs: number;
  private readonly store: SearchLogStore;
  private readonly queue: (() => Promise<void>)[] = [];
  private draining: Promise<void> | undefined;
  private readonly watched = new Map<string, { surface: SearchSurface; expires: number }>();
  private readonly timer: NodeJS.Timeout;
  private readonly now: () => number;
  private warned = 0;

  constructor(private readonly options: SearchLogOptions) {
    this.settings = options.settings;
    this.store = options.store;
    this.windowMs = options.windowMs ?? OUTCOME_WINDOW_MS;
    this.now = options.now ?? Date.now;
    this.timer = setInterval(() => this.enqueue(() => this.sweep()), Math.max(1_000, Math.min(30_000, this.windowMs / 4)));
    this.timer.unref();
  }

  /** SearchObserver: a face's search was answered. Only the time is taken here; the record is built off the request path. */
  searched(search: Parameters<SearchObserver['searched']>[0]): void {
    const time = this.now();
    this.enqueue(() => this.record(search, time));
  }

  private async record(search: Parameters<SearchObserver['searched']>[0], time: number): Promise<void> {
    const surface = (SEARCH_SURFACES as readonly string[]).includes(search.surface) ? (search.surface as SearchSurface) : 'rest';
    const results = search.results.slice(0, MAX_RECORDED_RESULTS).map((hit) => ({ name: hit.tool.name, score: round(hit.score) }));
    const record: SearchRecord = {
      id: randomUUID(),
      time,
      surface,
      ...(search.key === undefined ? {} : { key: search.key }),
      query: this.queryText(search.query),
      results,
      matched: search.matched ?? search.results.length,
      abstained: results.length === 0,
      ms: round(search.ms),
    };
    if (record.abstained) this.options.metrics?.searchOutcomes.inc({ surface, outcome: 'abstained' });
    else this.watch(record);
    const pending = record.abstained ? undefined : { match: matchKey(search.key, search.query), ttlMs: this.windowMs };
    await this.store.append(record, pending);
  }

  /**
   * A call of `tool` credited to an earlier search of `query` by this caller, as feedback credits it
   * (src/mcp/gateway/feedback-capture.ts, src/chat/core/feedback-capture.ts): the newest such search that returned
   * the tool and has no call yet gets it.
   */
  credited(credit: Credit): void {
    this.enqueue(async () => {
      const record = await this.store.credit(matchKey(credit.scope, credit.query), credit.tool);
      if (!record) return;
      this.options.metrics?.searchOutcomes.inc({ surface: record.surface, outcome: 'answered' });
      this.watched.delete(record.id);
    });
  }

  /** Newest first, as the routes read it. */
  list(query: { since?: number; limit: number; filter?: (record: SearchRecord) => boolean }): Promise<SearchRecord[]> {
    return this.store.list(query);
  }

  /** Resolves once every write queued so far has reached the store (tests; closing). */
  async flush(): Promise<void> {
    while (this.draining) await this.draining;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private queryText(query: string): string {
    const text = query.trim();
    if (this.settings.queries === 'off') return '';
    if (this.settings.queries === 'hash') return hashedQuery(text);
    return text.length > MAX_RECORDED_QUERY ? text.slice(0, MAX_RECORDED_QUERY) : text;
  }

  private watch(record: SearchRecord): void {
    this.watched.set(record.id, { surface: record.surface, expires: record.time + this.windowMs });
    if (this.watched.size > (this.options.maxWatched ?? 10_000)) this.watched.delete(this.watched.keys().next().value!);
  }

  /** Counts the watched searches whose window passed without a call as unanswered. */
  private async sweep(): Promise<void> {
    const now = this.now();
    const due: [string, SearchSurface][] = [];
    for (const [id, watched] of this.watched) {
      if (watched.expires > now) break;
      due.push([id, watched.surface]);
    }
    if (due.length === 0) return;
    for (const [id] of due) this.watched.delete(id);
    const called = await this.store.calledOf(due.map(([id]) => id));
    due.forEach(([, surface], i) => {
      if (called[i] === undefined) this.options.metrics?.searchOutcomes.inc({ surface, outcome: 'unanswered' });
    });
  }

  private enqueue(write: () => Promise<void>): void {
    if (this.queue.length >= (this.options.maxQueued ?? 1_000)) {
      this.dropped(new Error('search log queue full'));
      return;
    }
    this.queue.push(write);
    this.draining ??= this.drain();
  }

  private async drain(): Promise<void> {
    // The first write waits for the event loop's next turn: the request that recorded it is answered first.
    await new Promise((resolve) => setImmediate(resolve));
    try {
      for (let write = this.queue.shift(); write; write = this.queue.shift()) {
        try {
          await write();
        } catch (error) {
          this.dropped(error);
        }
      }
    } finally {
      this.draining = undefined;
    }
  }

  private dropped(error: unknown): void {
    this.options.metrics?.searchLogDropped.inc();
    // A store that is away fails every write: one warning a minute says so without flooding the log.
    const now = Date.now();
    if (now - this.warned < 60_000) return;
    this.warned = now;
    this.options.log?.warn({ err: error }, 'search log write dropped (counted in toolrouter_search_log_dropped_total)');
  }
}

/**
 * The caller and query a search and its later credit share (the pair feedback credits by). Taken over the query's
 * `sha256:` form, so a credit carrying only that form (what hash and off modes let the faces keep) pairs too.
 */
export function matchKey(key: string | undefined, query: string): string {
  return createHash('sha256')
    .update(key ?? '')
    .update('\0')
    .update(hashedQuery(query))
    .digest('base64url')
    .slice(0, 32);
}

function round(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}

export type { SearchOutcome };
