import { Router } from 'express';
import { z } from 'zod';
import type { SearchLog } from '../../analytics/log.js';
import { trafficLabels } from '../../analytics/summary.js';
import { parseSince, SINCE_MESSAGE } from '../../analytics/types.js';
import type { Catalog } from '../../catalog/catalog.js';
import type { LabelledQuery } from '../../catalog/types.js';
import type { Embedder } from '../../embedding/embedder.js';
import type { EngineConfig } from '../../eval/engine.js';
import { evaluate } from '../../eval/metrics.js';
import { RANKED_DEPTH, tune } from '../../eval/tune.js';
import type { IndexManager } from '../../indexing/manager.js';
import type { SearchDefaults } from '../../search/defaults.js';
import type { PreparedSearch, SearchService } from '../../search/search.js';
import { fusionMethodSchema, mergeWeights, weightsUpdateSchema } from '../../search/weights.js';
import { ToolrouterError } from '../../errors.js';
import { assertAdmin } from '../auth.js';
import { badRequest, parseBody, queryText } from '../errors.js';

/**
 * Bounds on one evaluation request. Retrieval runs once per query and the grid re-fuses the cached candidates, but it
 * all runs on the event loop of an instance that also serves searches. Measured over HTTP on the fixture (57 tools,
 * 2 shared cores): 64 queries × 22 settings 0.2 s, 1,000 queries × 42 settings 2.3–3.2 s. The caps keep the worst
 * case there; searches on the same instance wait meanwhile.
 */
export const EVAL_LIMITS = { maxQueries: 1_000, maxExpected: 50, maxSteps: 20, defaultSteps: 10 } as const;

export interface TuningRouteOptions {
  catalog: Catalog;
  indexes: IndexManager;
  search: SearchService;
  embedder: Embedder;
  config: EngineConfig;
  defaults: SearchDefaults;
  /** The search log, for `POST /v1/eval {from: "traffic"}`; absent (analytics off), traffic cannot be evaluated. */
  traffic?: SearchLog;
}

/** min_score values each evaluation reports Recall and MRR at (with the current weights and fusion). */
export const MIN_SCORE_STEPS = [0, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3] as const;

const settingsBody = z
  .object({
    weights: weightsUpdateSchema.optional(),
    fusion: fusionMethodSchema.optional(),
  })
  .strict()
  .refine((body) => body.weights !== undefined || body.fusion !== undefined, 'give weights, fusion or both');

/**
 * Run-time tuning (admin): evaluate labelled queries against the live catalog and index over a grid of fusion
 * settings, and read, apply or reset the search defaults. Kept apart from the search routes so an access guard can be
 * put on this router alone.
 */
export function tuningRoutes(deps: TuningRouteOptions): Router {
  const { catalog, search, config, defaults, traffic } = deps;
  const router = Router();
  const maxQueryLength = config.search.maxQueryLength;
  const evalBody = z
    .object({
      queries: z
        .array(
          z
            .object({
              query: queryText(maxQueryLength),
              expected: z
                .array(z.string({ error: 'must be tool names' }).min(1, 'must not be empty').max(128, 'is not a tool name (over 128 characters)'), {
                  error: 'is required and must be an array of tool names',
                })
                .min(1, 'must name at least one tool')
                .max(EVAL_LIMITS.maxExpected, `must name at most ${EVAL_LIMITS.maxExpected} tools`),
            })
            .strict(),
          { error: 'is required and must be an array of {query, expected: [names]}' },
        )
        .min(1, 'must hold at least one query')
        .max(EVAL_LIMITS.maxQueries, `must hold at most ${EVAL_LIMITS.maxQueries} queries`),
      grid: z
        .object({
          steps: z
            .number({ error: 'must be a number' })
            .int('must be an integer')
            .min(1, 'must be at least 1')
            .max(EVAL_LIMITS.maxSteps, `must be at most ${EVAL_LIMITS.maxSteps}`),
        })
        .strict()
        .optional(),
    })
    .strict();

  // Traffic labels: each answered search of the log, labelled by the tool then called (src/analytics/summary.ts).
  const trafficBody = z
    .object({
      from: z.literal('traffic'),
      since: z
        .union([z.string(), z.number()], { error: SINCE_MESSAGE })
        .transform((value, ctx) => {
          const time = parseSince(value);
          if (time === undefined) {
            ctx.addIssue({ code: 'custom', message: SINCE_MESSAGE });
            return z.NEVER;
          }
          return time;
        })
        .optional(),
      grid: evalBody.shape.grid,
    })
    .strict();

  // One evaluation at a time per instance: runs hold the event loop in stretches, and stacking them would hurt searches.
  let running = false;

  // Evaluations read the whole catalog and changed defaults affect every caller: admin only.
  router.post('/v1/eval', async (req, res) => {
    assertAdmin(res);
    const fromTraffic = typeof req.body === 'object' && req.body !== null && 'from' in req.body;
    let body: { queries: LabelledQuery[]; grid?: { steps: number } | undefined };
    let source: Record<string, unknown> | undefined;
    if (fromTraffic) {
      const asked = parseBody(trafficBody, req.body);
      if (!traffic) throw badRequest('from: "traffic" needs the search log (analytics.enabled is false on this service)');
      if (traffic.settings.queries !== 'full') {
        throw badRequest(`from: "traffic" needs the queries' text, and analytics.queries is "${traffic.settings.queries}" (set it to "full")`);
      }
      // The newest answered searches, as many as one evaluation takes.
      const labels = trafficLabels(
        await traffic.list({ limit: EVAL_LIMITS.maxQueries, ...(asked.since === undefined ? {} : { since: asked.since }), filter: (record) => trafficLabels([record]).length > 0 }),
      );
      if (labels.length === 0) {
        throw badRequest(`from: "traffic": no answered search${asked.since === undefined ? '' : ` since ${new Date(asked.since).toISOString()}`} to learn from yet (a label is a search followed by a call of a tool it found)`);
      }
      // Oldest first, as a file of the same labels would list them.
      const ordered = [...labels].reverse();
      body = { queries: ordered.map(({ query, expected }) => ({ query, expected })), ...(asked.grid ? { grid: asked.grid } : {}) };
      source = {
        from: 'traffic',
        labels: labels.length,
        first: new Date(ordered[0]!.time).toISOString(),
        last: new Date(ordered.at(-1)!.time).toISOString(),
        ...(asked.since === undefined ? {} : { since: new Date(asked.since).toISOString() }),
      };
    } else {
      body = parseBody(evalBody, req.body);
    }
    const queries: LabelledQuery[] = [];
    const skipped: { line: number; query: string }[] = [];
    body.queries.forEach((labelled, i) => {
      if (labelled.expected.some((name) => catalog.get(name) !== undefined)) queries.push(labelled);
      else skipped.push({ line: i + 1, query: labelled.query });
    });
    if (queries.length === 0) {
      throw badRequest(`queries: none of the ${body.queries.length} queries names a tool of the live catalog (expected names are full tool names, e.g. ${sampleName(catalog)})`);
    }
    if (running) throw new ToolrouterError('busy', 'an evaluation is already running on this instance; retry when it has finished');
    running = true;
    try {
      const steps = body.grid?.steps ?? EVAL_LIMITS.defaultSteps;
      const { mode } = search.settings;
      const current = { weights: { ...search.settings.weights }, fusion: search.settings.fusion };
      // Ranked by the live search service itself, over the live index and catalog: the same code `npm run tune` runs
      // over files, and the same ranking /v1/tools/search returns for each row's settings.
      const { rows, best } = await tune({ search }, queries, { steps });
      // What searches get right now (reranker included, when configured).
      let index: { hash: string | null; model: string | null } | undefined;
      const now = await evaluate(async (query) => {
        const response = await search.search({ query, topK: RANKED_DEPTH, mode, ...current });
        index = response.index;
        return response.results.map((hit) => hit.tool.name);
      }, queries);
      // The cut at each min_score, under the current weights: how much of what agents called each one still returns.
      const cuts = [];
      const byQuery = new Map<string, PreparedSearch>();
      for (const { query } of queries) if (!byQuery.has(query)) byQuery.set(query, await search.prepare({ query, mode, rerank: false }));
      for (const minScore of MIN_SCORE_STEPS) {
        const result = await evaluate(async (query) => (await byQuery.get(query)!.rank({ ...current, topK: RANKED_DEPTH, minScore })).results.map((hit) => hit.tool.name), queries);
        cuts.push({ min_score: minScore, ...metrics(result) });
      }
      res.json({
        ...(source ? { source } : {}),
        catalog: { hash: catalog.snapshot().catalogHash, tools: catalog.snapshot().entries.length },
        index,
        queries: queries.length,
        skipped,
        steps,
        depth: RANKED_DEPTH,
        current: { mode, ...current, ...metrics(now) },
        best: row(best),
        rows: rows.map(row),
        min_scores: cuts,
      });
    } finally {
      running = false;
    }
  });

  router.get('/v1/search/settings', (_req, res) => {
    res.json(settingsView(search, defaults));
  });

  router.put('/v1/search/settings', async (req, res) => {
    assertAdmin(res);
    const body = parseBody(settingsBody, req.body);
    const weights = mergeWeights(search.settings.weights, body.weights);
    await defaults.apply({ weights, fusion: body.fusion ?? search.settings.fusion });
    res.json(settingsView(search, defaults));
  });

  router.delete('/v1/search/settings', async (_req, res) => {
    assertAdmin(res);
    await defaults.reset();
    res.json(settingsView(search, defaults));
  });

  return router;
}

function settingsView(search: SearchService, defaults: SearchDefaults) {
  const { mode, topK, maxTopK, candidates } = search.settings;
  return { ...defaults.state(), mode, topK, maxTopK, candidates };
}

function metrics(result: { n: number; recallAt1: number; recallAt5: number; mrr: number }) {
  return { n: result.n, recallAt1: result.recallAt1, recallAt5: result.recallAt5, mrr: result.mrr };
}

function row(result: Parameters<typeof metrics>[0] & { fusion: string; weights: { bm25: number; vector: number } }) {
  return { fusion: result.fusion, weights: result.weights, ...metrics(result) };
}

function sampleName(catalog: Catalog): string {
  return catalog.snapshot().entries[0]?.tool.name ?? 'server__tool';
}
