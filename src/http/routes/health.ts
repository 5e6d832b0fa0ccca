import type { RedisClient } from '../../redis/connection.js';
import { Router } from 'express';
import type { IndexManager } from '../../indexing/manager.js';
import type { Metrics } from '../../metrics.js';

/** A probe must answer well inside a load balancer's timeout, even when Redis hangs rather than refuses. */
const REDIS_PING_TIMEOUT_MS = 1_000;

interface Check {
  ok: boolean;
  detail?: string;
  /** A Redis failure every instance shares (src/redis/health.ts): shown, and not a reason to leave the balancer. */
  shared?: boolean;
}

/** What `/health`, `/ready` and `/metrics` need; the app's options include these. */
export interface HealthRouteOptions {
  indexes: IndexManager;
  /** The Redis connection of the shared index pipeline; /ready checks it answers. */
  redis?: RedisClient;
  /**
   * The keyed read/write probe of the slot (cluster) or master (Sentinel) toolrouter writes to (src/redis/health.ts);
   * when given, /ready's Redis check is this probe rather than a PING of `redis`.
   */
  redisHealth?: { check(): Promise<Check> };
  /** /ready fails once the live index has not been built for the current catalog for this long (ready.indexGraceMs). */
  indexGraceMs?: number;
  /** This router's metrics: GET /metrics serves its registry. */
  metrics: Metrics;
  /** True once a SIGTERM started the drain (src/shutdown.ts): /ready fails so the balancer stops sending here. */
  draining?: () => boolean;
  /**
   * False until every upstream MCP server had its first connection attempt: a fresh instance taken into rotation
   * before that would answer calls with "unavailable right now" (a restarted instance in a rolling restart).
   */
  upstreamsSettled?: () => boolean;
}

export function healthRoutes({ indexes, redis, redisHealth, indexGraceMs, metrics, draining, upstreamsSettled }: HealthRouteOptions): Router {
  const router = Router();
  const grace = indexGraceMs ?? 300_000;
  /** Since when the live index has not been built for the current catalog (per catalog hash). */
  let behind: { catalogHash: string; since: number } | undefined;
  router.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  router.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready when searches can be answered (an index is loaded) and catalog writes can be: Redis takes a write where
  // toolrouter's keys are (the node serving their hash slot on a cluster, the current master under Sentinel).
  router.get('/ready', async (_req, res) => {
    const status = indexes.status();
    const checks: Record<string, Check> = {
      index: status.indexedHash !== null ? { ok: true } : { ok: false, detail: `no index loaded yet (index ${status.state})` },
    };
    if (upstreamsSettled && !upstreamsSettled()) checks.upstreams = { ok: false, detail: 'still connecting to the upstream MCP servers (first attempt)' };
    // Shutting down: still serving everything, but the balancer should send new requests elsewhere.
    if (draining?.()) checks.shutdown = { ok: false, detail: 'shutting down: draining (requests are still served until shutdown.drainMs has passed)' };
    // An index of an older catalog still answers, but an instance stuck on it (a lost build, Redis restarted empty)
    // gives different answers from the others: after the grace period it is not ready.
    if (status.indexedHash !== null && status.indexedHash !== status.catalogHash) {
      if (behind?.catalogHash !== status.catalogHash) behind = { catalogHash: status.catalogHash, since: Date.now() };
      const waitedMs = Date.now() - behind.since;
      if (waitedMs > grace) {
        checks.indexCurrent = {
          ok: false,
          detail: `the index is for catalog ${status.indexedHash.slice(0, 12)}, not the current catalog ${status.catalogHash.slice(0, 12)}, for ${Math.round(waitedMs / 1000)} s (grace ${Math.round(grace / 1000)} s); see /v1/index/status`,
        };
      }
    } else {
      behind = undefined;
    }
    if (redisHealth) checks.redis = await redisHealth.check();
    else if (redis) checks.redis = await pingRedis(redis);
    // Ready: this instance can serve. A Redis failure every instance shares (it refuses writes, or stalls) leaves it in
    // (reads are served, writes answer 503 with Retry-After); `degraded` names it.
    const failing = Object.keys(checks).filter((name) => !checks[name]!.ok && !checks[name]!.shared);
    const degraded = Object.keys(checks).filter((name) => !checks[name]!.ok && checks[name]!.shared);
    const ready = failing.length === 0;
    res.status(ready ? 200 : 503).json({ ready, index: status.state, checks, failing, ...(degraded.length > 0 ? { degraded } : {}) });
  });
  return router;
}

async function pingRedis(redis: RedisClient): Promise<Check> {
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
