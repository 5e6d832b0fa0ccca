import { Router } from 'express';
import { z } from 'zod';
import { HttpError, parseBody } from '../errors.js';
import type { Catalog, CatalogEntry } from '../../catalog/catalog.js';
import type { Access } from '../../auth/access.js';
import type { StaticSources } from '../../catalog/static-sources.js';
import type { IndexManager } from '../../indexing/manager.js';
import { accessOf, assertAdmin } from '../auth.js';
import { catalogViews } from '../catalog-views.js';
import { MAX_SOURCE_DESCRIPTION } from '../../catalog/catalog.js';

const putSourceBody = z
  .object({
    tools: z.array(z.unknown(), { error: '"tools" must be an array of MCP tool objects' }),
    /** What the source is for: indexed with its tools and named in search_tools' description. */
    description: z
      .string({ error: '"description" must be a string' })
      .max(MAX_SOURCE_DESCRIPTION, `"description" must be at most ${MAX_SOURCE_DESCRIPTION} characters`)
      .optional(),
  })
  .strict();

/** What the catalog routes (`/v1/catalog…`) need; the app's options include these. */
export interface CatalogRouteOptions {
  catalog: Catalog;
  sources: StaticSources;
  indexes: IndexManager;
  /** Governance (src/policy): tools no policy could let this caller call are left out of its listing. Absent: none. */
  policyView?: (access: Access) => { visible: (entry: CatalogEntry) => boolean; key: string } | undefined;
}

export function catalogRoutes({ catalog, sources, indexes, policyView }: CatalogRouteOptions): Router {
  const router = Router();
  const views = catalogViews(indexes);

  // A key sees only its own part of the catalog: its tools, and the sources they come from.
  router.get('/v1/catalog', (_req, res) => {
    const access = accessOf(res);
    const snapshot = catalog.snapshot();
    const policy = policyView?.(access);
    const entries = snapshot.entries.filter((entry) => access.canSee(entry) && (policy?.visible(entry) ?? true));
    res.json({
      // A restricted key's hash is of its own tools: another tenant's change must not show in it.
      catalogHash: views.catalogHash(snapshot, access),
      sources: access.restricted ? [...new Set(entries.map((entry) => entry.source))] : catalog.sourceNames(),
      tools: entries.map((entry) => ({
        source: entry.source,
        ...(entry.server === undefined ? {} : { server: entry.server }),
        tool: entry.tool,
      })),
    });
  });

  router.put('/v1/catalog/sources/:source', async (req, res) => {
    assertAdmin(res);
    refuseReserved(catalog, req.params.source);
    const { tools, description } = parseBody(putSourceBody, req.body);
    const snapshot = await sources.put(req.params.source, tools, description);
    res.json({ catalogHash: snapshot.catalogHash, tools: tools.length });
  });

  router.delete('/v1/catalog/sources/:source', async (req, res) => {
    assertAdmin(res);
    refuseReserved(catalog, req.params.source);
    if (!(await sources.delete(req.params.source))) {
      throw new HttpError(404, 'not_found', `no catalog source named "${req.params.source}"`);
    }
    res.json({ catalogHash: catalog.snapshot().catalogHash, deleted: req.params.source });
  });

  return router;
}

/** Upstream MCP servers own their source names; the REST API must not replace or delete their tools. */
function refuseReserved(catalog: Catalog, source: string): void {
  const owner = catalog.reservedBy(source);
  if (owner !== undefined) {
    throw new HttpError(409, 'conflict', `source "${source}" belongs to ${owner}; static sources need another name`);
  }
}
