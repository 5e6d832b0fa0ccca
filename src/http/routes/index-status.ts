import { Router } from 'express';
import type { IndexManager, IndexPipeline } from '../../indexing/manager.js';
import { accessOf, requireAdmin } from '../auth.js';
import { catalogViews } from '../catalog-views.js';

/** What the index routes (`/v1/index…`) need; the app's options include these. */
export interface IndexRouteOptions {
  indexes: IndexManager;
  pipeline: IndexPipeline;
}

export function indexRoutes({ indexes, pipeline }: IndexRouteOptions): Router {
  const router = Router();
  const views = catalogViews(indexes);
  router.get('/v1/index/status', async (_req, res) => {
    const access = accessOf(res);
    const status = views.status(access);
    // Why a build is waiting names the queue's job and errors: for the admin only.
    const waiting = access.isAdmin && status.state === 'building' ? await withinHalfSecond(pipeline.buildWait?.()) : undefined;
    res.json(waiting ? { ...status, waiting } : status);
  });
  router.post('/v1/index/rebuild', requireAdmin, (_req, res) => {
    // The rebuild's outcome shows in /v1/index/status; a failure there is not this request's failure.
    void pipeline.rebuild();
    res.status(202).json(indexes.status());
  });
  return router;
}

/** The queue's connection waits out a Redis outage; the status must answer anyway (without the reason). */
async function withinHalfSecond<T>(work: Promise<T> | undefined): Promise<T | undefined> {
  if (!work) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), 500);
  });
  try {
    return await Promise.race([work.catch(() => undefined), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
