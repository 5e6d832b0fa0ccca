import { Router } from 'express';
import type { AppDependencies } from '../app.js';
import { requireAdmin } from '../auth.js';

export function indexRoutes({ indexes, pipeline }: Pick<AppDependencies, 'indexes' | 'pipeline'>): Router {
  const router = Router();
  router.get('/v1/index/status', (_req, res) => {
    res.json(indexes.status());
  });
  router.post('/v1/index/rebuild', requireAdmin, (_req, res) => {
    // The rebuild's outcome shows in /v1/index/status; a failure there is not this request's failure.
    void pipeline.rebuild();
    res.status(202).json(indexes.status());
  });
  return router;
}
