import type { RequestHandler } from 'express';
import { z } from 'zod';
import { SEARCH_MODES, SELECT_PREFIX, type SearchService } from '../../search/search.js';
import { briefTool } from '../../search/coverage.js';
import { codeTool } from '../../codemode/signatures.js';
import { fusionMethodSchema, mergeWeights, weightsUpdateSchema } from '../../search/weights.js';
import { badRequest, HttpError, parseBody, queryText } from '../errors.js';
import type { IndexManager } from '../../indexing/manager.js';
import { accessOf } from '../auth.js';
import type { Access } from '../../auth/access.js';
import type { CatalogEntry } from '../../catalog/catalog.js';
import { catalogViews } from '../catalog-views.js';

export const SEARCH_PATH = '/v1/tools/search';

/** `POST /v1/tools/search`: mounted by the app ahead of the other routes (src/http/app.ts). */
/** What the search route needs; the app's options include these. */
export interface SearchRouteOptions {
  search: SearchService;
  maxQueryLength: number;
  indexes: IndexManager;
  /**
   * Governance (src/policy): what policy lets this caller see (a tool no policy could permit is never found) and a
   * key naming that view; undefined when no policy applies. Absent: no policies.
   */
  policyView?: (access: Access) => { visible: (entry: CatalogEntry) => boolean; key: string } | undefined;
}

export function searchRoute({ search, maxQueryLength, indexes, policyView }: SearchRouteOptions): RequestHandler {
  const views = catalogViews(indexes);
  const searchBody = z
    .object({
      query: queryText(maxQueryLength),
      top_k: z.number().int('must be an integer').min(1, 'must be at least 1').optional(),
      mode: z.enum(SEARCH_MODES, { error: `must be one of ${SEARCH_MODES.join(', ')}` }).optional(),
      weights: weightsUpdateSchema.optional(),
      fusion: fusionMethodSchema.optional(),
      min_score: z.number().finite().min(0, 'must be 0 or more').max(1, 'is a calibrated score: 0 to 1').optional(),
      rerank: z.boolean().optional(),
      /** code: a TypeScript signature per tool (code mode's call_tool overloads) instead of its JSON Schema. */
      detail: z.enum(['brief', 'full', 'code'], { error: 'must be "brief", "full" or "code"' }).optional(),
    })
    .strict();
  const fields = Object.keys(searchBody.shape);

  return async (req, res) => {
    const access = accessOf(res);
    if (!access.searchEnabled) throw new HttpError(403, 'forbidden', 'tool search is disabled for this key; list its tools with GET /mcp-rest/tools/list');
    const body = parseBody(searchBody, withFieldHints(req.body, fields));
    if (body.weights) mergeWeights(search.settings.weights, body.weights);
    const response = await search.search({
      query: body.query,
      topK: body.top_k,
      mode: body.mode,
      weights: body.weights,
      fusion: body.fusion,
      minScore: body.min_score,
      rerank: body.rerank,
      // A key's search ranks only what it may see, so neither results nor their order tell it about other tools. A
      // caller who sees everything passes no filter: the index searches then run unfiltered.
      ...visibility(access, policyView?.(access)),
      feedbackScope: access.scope,
      observe: { surface: 'rest', ...(access.scope === undefined ? {} : { key: access.scope }) },
    });
    // `select:` always answers with full definitions: it is how a brief answer's tools are fetched.
    const selecting = body.query.trim().toLowerCase().startsWith(SELECT_PREFIX);
    const shown = selecting ? 'full' : (body.detail ?? 'full');
    const form = (tool: CatalogEntry['tool']) => (shown === 'brief' ? briefTool(tool) : shown === 'code' ? codeTool(tool) : tool);
    res.json({
      results: response.results.map((hit) => ({ ...form(hit.tool), score: hit.score, scores: hit.scores })),
      ...(response.matched === undefined ? {} : { matched: response.matched }),
      index: views.searchIndex(access, response.index),
      ...(response.fallback ? { fallback: response.fallback } : {}),
    });
  };
}

/** The search filter for this caller: its key's view, narrowed by policy; none for a caller who sees everything. */
function visibility(access: Access, policy: { visible: (entry: CatalogEntry) => boolean; key: string } | undefined): { visible?: (entry: CatalogEntry) => boolean; visibilityKey?: string } {
  if (policy) return { visible: (entry) => access.canSee(entry) && policy.visible(entry), visibilityKey: `${access.viewKey}\u0000${policy.key}` };
  return access.restricted ? { visible: (entry) => access.canSee(entry), visibilityKey: access.viewKey } : {};
}

/**
 * Fields are snake_case (`top_k`, `min_score`); a camelCase spelling of one (`topK`, as the JavaScript SDKs write
 * it) is refused with the right name rather than only "unrecognized key", which a user reads as "not supported".
 */
function withFieldHints(body: unknown, fields: readonly string[]): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const hints: string[] = [];
  for (const key of Object.keys(body)) {
    if (fields.includes(key) || key.length > 64) continue;
    const snake = key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
    if (snake !== key && fields.includes(snake)) hints.push(`${key}: unknown field; the field is "${snake}"`);
  }
  if (hints.length > 0) throw badRequest(hints.join('; '));
  return body;
}
