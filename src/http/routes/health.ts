import type { Redis } from 'ioredis';
import { Router } from 'express';
import { metrics } from '../../metrics.js';
import type { AppDependencies } from '../app.js';

/** A probe must answer well inside a load balancer's timeout, even when Redis hangs rather than refuses. */
const REDIS_PING_TIMEOUT_MS = 1_000;

interface Check {
  ok: boolean;
  detail?: string;
}

export function healthRoutes({ indexes, redis }: Pick<AppDependencies, 'indexes' | 'redis'>): Router {
  const router = Router();
  router.get('/metrics', async (_req, res) => {
    res.type(metrics.contentType).send(await metrics.metrics());
  });
  router.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready when searches can be answered (an index is loaded) and catalog writes can be (Redis answers, when used).
  router.get('/ready', async (_req, res) => {
    const status = indexes.status();
    const checks: Record<string, Check> = {
      index: status.indexedHash !== null ? { ok: true } : { ok: false, detail: `no index loaded yet (index ${status.state})` },
    };
    if (redis) checks.redis = await pingRedis(redis);
    const failing = Object.keys(checks).filter((name) => !checks[name]!.ok);
    const ready = failing.length === 0;
    res.status(ready ? 200 : 503).json({ ready, index: status.state, checks, failing });
  });
  return router;
}

async function pingRedis(redis: Redis): Promise<Check> {
  // While disconnected a command would wait in the offline queue; the connection state already answers.
  if (redis.status !== 'ready') return { ok: false, detail: `Redis is not connected (${redis.status})` };
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.ping(),
      new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`no PONG within ${REDIS_PING_TIMEOUT_MS} ms`)), REDIS_PING_TIMEOUT_MS);
      }),
    ]);
    return { ok: true };
  } catch (error) {
    return { ok: false, detail: `Redis did not answer: ${(error as Error).message}` };
  } finally {
    clearTimeout(timer);
  }
}
