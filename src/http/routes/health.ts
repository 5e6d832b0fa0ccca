import { Router } from 'express';
import { metrics } from '../../metrics.js';
import type { AppDependencies } from '../app.js';

export function healthRoutes({ indexes }: Pick<AppDependencies, 'indexes'>): Router {
  const router = Router();
  router.get('/metrics', async (_req, res) => {
    res.type(metrics.contentType).send(await metrics.metrics());
  });
  router.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready once an index is loaded: before that, searches would answer 503.
  router.get('/ready', (_req, res) => {
    const status = indexes.status();
    const ready = status.indexedHash !== null;
    res.status(ready ? 200 : 503).json({ ready, index: status.state });
  });
  return router;
}
