import { Router } from 'express';
import type { AppDependencies } from '../app.js';
import { accessOf, requireAdmin } from '../auth.js';
import { catalogViews } from '../catalog-views.js';

export function indexRoutes({ indexes, pipeline }: Pick<AppDependencies, 'indexes' | 'pipeline'>): Router {
  const router = Router();
  const views = catalogViews(indexes);
  router.get('/v1/index/status', (_req, res) => {
    res.json(views.status(accessOf(res)));
  });
  router.post('/v1/index/rebuild', requireAdmin, (_req, res) => {
    // The rebuild's outcome shows in /v1/index/status; a failure there is not this request's failure.
    void pipeline.rebuild();
    res.status(202).json(indexes.status());
  });
  return router;
}
