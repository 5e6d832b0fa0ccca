import { Router, type Request, type Response } from 'express';
import { z } from 'zod';
import type { SearchLog } from '../../analytics/log.js';
import { summarise } from '../../analytics/summary.js';
import { DAY_MS, parseSince, SEARCH_SURFACES, SINCE_MESSAGE, type SearchRecord } from '../../analytics/types.js';
import type { Catalog } from '../../catalog/catalog.js';
import { ToolrouterError } from '../../errors.js';
import { accessOf } from '../auth.js';
import { HttpError, parseBody } from '../errors.js';

/** Searches one GET /v1/analytics/searches answers at most; `limit` defaults to 100. */
export const MAX_SEARCHES_LISTED = 1_000;

export interface AnalyticsRouteOptions {
  catalog: Catalog;
  /** The search log; absent when analytics.enabled is false (the routes then answer 404). */
  analytics?: SearchLog | undefined;
}

/** `since`: an ISO 8601 time or milliseconds since the epoch. */
const since = z
  .string()
  .transform((value, ctx) => {
    const time = parseSince(value);
    if (time === undefined) {
      ctx.addIssue({ code: 'custom', message: SINCE_MESSAGE });
      return z.NEVER;
    }
    return time;
  })
  .optional();

const searchesQuery = z
  .object({
    limit: z
      .string()
      .regex(/^\d+$/, 'must be a whole number')
      .transform(Number)
      .pipe(z.number().int().min(1, 'must be at least 1').max(MAX_SEARCHES_LISTED, `must be at most ${MAX_SEARCHES_LISTED}`))
      .optional(),
    surface: z.enum(SEARCH_SURFACES, { error: `must be one of ${SEARCH_SURFACES.join(', ')}` }).optional(),
    key: z.string().min(1, 'must not be empty').max(128, 'is not a key id').optional(),
    since,
  })
  .strict();

const summaryQuery = z.object({ since, key: searchesQuery.shape.key }).strict();

/**
 * The search log, read back: `GET /v1/analytics/searches` (newest first) and `GET /v1/analytics/summary`. The admin
 * sees every caller's searches (and may narrow them with `key`); a key sees only its own.
 */
export function analyticsRoutes({ catalog, analytics }: AnalyticsRouteOptions): Router {
  const router = Router();

  router.get('/v1/analytics/searches', async (req, res) => {
    const log = enabled(analytics);
    const query = parseQuery(searchesQuery, req);
    const key = readerKey(res, query.key);
    const searches = await log.list({
      limit: query.limit ?? 100,
      ...(query.since === undefined ? {} : { since: query.since }),
      filter: (record) => (key === undefined || record.key === key) && (query.surface === undefined || record.surface === query.surface),
    });
    res.json({ searches: searches.map(view) });
  });

  router.get('/v1/analytics/summary', async (req, res) => {
    const log = enabled(analytics);
    const query = parseQuery(summaryQuery, req);
    const key = readerKey(res, query.key);
    const access = accessOf(res);
    const now = Date.now();
    const from = query.since ?? now - log.settings.maxAgeDays * DAY_MS;
    // Every kept search since `from` (the log holds at most analytics.maxEntries).
    const records = await log.list({ since: from, limit: log.settings.maxEntries, filter: (record) => key === undefined || record.key === key });
    const tools = catalog
      .snapshot()
      .entries.filter((entry) => access.canSee(entry))
      .map((entry) => entry.tool.name);
    res.json({ since: new Date(from).toISOString(), ...summarise(records, tools, { now, windowMs: log.windowMs }) });
  });

  return router;
}

function enabled(analytics: SearchLog | undefined): SearchLog {
  if (!analytics) throw new HttpError(404, 'not_found', 'search analytics are disabled on this service (analytics.enabled is false)');
  return analytics;
}

/** The key whose searches the reader gets: any (or the one asked for) for the admin, its own for a key. */
function readerKey(res: Response, asked: string | undefined): string | undefined {
  const access = accessOf(res);
  if (access.isAdmin) return asked;
  const own = access.scope;
  // A caller with no key of its own (an anonymous chat caller) has no searches to read.
  if (own === undefined) throw new ToolrouterError('forbidden', 'search analytics need the admin key or an API key');
  if (asked !== undefined && asked !== own) throw new ToolrouterError('forbidden', 'a key reads only its own searches');
  return own;
}

function parseQuery<T>(schema: z.ZodType<T>, req: Request): T {
  const query = req.query as Record<string, unknown>;
  for (const [name, value] of Object.entries(query)) {
    if (typeof value !== 'string') throw new ToolrouterError('invalid_request', `${name}: give it once, as a string`);
  }
  return parseBody(schema, query);
}

function view(record: SearchRecord) {
  return {
    id: record.id,
    time: new Date(record.time).toISOString(),
    surface: record.surface,
    ...(record.key === undefined ? {} : { key: record.key }),
    query: record.query,
    results: record.results,
    matched: record.matched,
    abstained: record.abstained,
    ...(record.called === undefined ? {} : { called: record.called }),
    ms: record.ms,
  };
}
