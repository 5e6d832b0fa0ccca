/** `GET /v1/audit` (admin): the audit trail, newest first, filtered and paged (docs/audit.md). */
import { Router, type Request } from 'express';
import { z } from 'zod';
import type { AuditLog } from '../../audit/log.js';
import { ToolrouterError } from '../../errors.js';
import { assertAdmin } from '../auth.js';
import { parseBody } from '../errors.js';

/** Records one GET answers at most; `limit` defaults to 100. */
export const MAX_AUDIT_LISTED = 1_000;

export interface AuditRouteOptions {
  /** Absent when audit.enabled is false (the route then answers 404). */
  audit?: AuditLog | undefined;
}

/** An ISO 8601 time or milliseconds since the epoch, within what a Date can hold. */
const time = z
  .string()
  .transform((value, ctx) => {
    const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
    if (!Number.isFinite(ms) || Number.isNaN(new Date(ms).getTime())) {
      ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 time (2026-11-27T10:00:00Z) or milliseconds since the epoch' });
      return z.NEVER;
    }
    return ms;
  })
  .optional();

const auditQuery = z
  .object({
    since: time,
    until: time,
    caller: z.string().min(1, 'must not be empty').max(600).optional(),
    tool: z.string().min(1, 'must not be empty').max(600).optional(),
    decision: z.enum(['permit', 'deny', 'confirmed', 'declined', 'blocked'], { error: 'must be one of permit, deny, confirmed, declined, blocked' }).optional(),
    limit: z
      .string()
      .regex(/^\d+$/, 'must be a whole number')
      .transform(Number)
      .pipe(z.number().int().min(1, 'must be at least 1').max(MAX_AUDIT_LISTED, `must be at most ${MAX_AUDIT_LISTED}`))
      .optional(),
    cursor: z.string().regex(/^\d{1,16}-\d{1,16}$/, 'must be the `next` of an earlier page').optional(),
  })
  .strict();

export function auditRoutes({ audit }: AuditRouteOptions): Router {
  const router = Router();
  router.get('/v1/audit', async (req, res) => {
    assertAdmin(res);
    if (!audit) throw new ToolrouterError('not_found', 'the audit trail is disabled on this service (audit.enabled is false)');
    const query = parseQuery(req);
    const page = await audit.read({
      limit: query.limit ?? 100,
      ...(query.since === undefined ? {} : { since: query.since }),
      ...(query.until === undefined ? {} : { until: query.until }),
      ...(query.caller === undefined ? {} : { caller: query.caller }),
      ...(query.tool === undefined ? {} : { tool: query.tool }),
      ...(query.decision === undefined ? {} : { decision: query.decision }),
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    });
    res.json(page);
  });
  return router;
}

function parseQuery(req: Request): z.output<typeof auditQuery> {
  const query = req.query as Record<string, unknown>;
  for (const [name, value] of Object.entries(query)) {
    if (typeof value !== 'string') throw new ToolrouterError('invalid_request', `${name}: give it once, as a string`);
  }
  return parseBody(auditQuery, query);
}
