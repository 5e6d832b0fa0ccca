import { Router } from 'express';
import { z } from 'zod';
import type { Catalog } from '../../catalog/catalog.js';
import type { FeedbackRecorder } from '../../feedback/service.js';
import { accessOf } from '../auth.js';
import { HttpError, parseBody, queryText } from '../errors.js';

/**
 * `POST /v1/feedback {query, tool, relevant?}`: a client that knows which tool served a query (or that one did not)
 * says so; similar queries rank that tool higher (or lower) from then on.
 */
export function feedbackRoutes(deps: { catalog: Catalog; feedback: FeedbackRecorder | undefined; maxQueryLength: number }): Router {
  const { catalog, feedback, maxQueryLength } = deps;
  const router = Router();
  const body = z
    .object({
      query: queryText(maxQueryLength),
      tool: z.string({ error: 'is required and must be a tool name' }).min(1, 'must not be empty'),
      relevant: z.boolean({ error: 'must be true or false' }).default(true),
    })
    .strict();

  router.post('/v1/feedback', async (req, res) => {
    if (!feedback) throw new HttpError(404, 'not_found', 'feedback is disabled on this service (feedback.enabled is false)');
    const parsed = parseBody(body, req.body);
    const access = accessOf(res);
    const entry = catalog.get(parsed.tool);
    // A key is told nothing about tools it cannot see, not even that they exist.
    if (!entry || !access.canSee(entry)) throw new HttpError(404, 'not_found', `unknown tool "${parsed.tool}"`);
    const event = await feedback.record({ query: parsed.query, tool: parsed.tool, relevant: parsed.relevant, scope: access.scope, surface: 'rest' });
    res.status(201).json({ query: event.query, tool: event.tool, relevant: event.relevant, time: new Date(event.time).toISOString() });
  });

  return router;
}
