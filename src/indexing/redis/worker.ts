import { Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { createEmbedder, type EmbedderOptions } from '../../embedding/embedder.js';
import type { Metrics } from '../../metrics.js';
import { connectRedis, type RedisKeys } from '../../redis/connection.js';
import { redisForm, type RedisSettings } from '../../redis/settings.js';
import { RedisBus } from '../../redis/bus.js';
import type { HnswSettings, LexicalSettings, QueueSettings } from '../settings.js';
import { ArtifactStore } from './artifact-store.js';
import { runBuildJob, type BuildJobData, type BuildJobResult } from './build-job.js';
import { RedisEmbeddingCache } from './embedding-cache.js';
import { indexBuildSpan } from '../../telemetry/spans.js';

/** What `startIndexWorker` takes: its slices of the configuration, handed in by the worker process's assembly. */
export interface IndexWorkerOptions {
  /** Where Redis is (URL, Sentinel or Cluster). */
  redis: RedisSettings;
  /** The deployment's key names (queue.prefix). */
  keys: RedisKeys;
  embedding: EmbedderOptions;
  lexical: LexicalSettings;
  hnsw: HnswSettings;
  queue: Pick<QueueSettings, 'retention' | 'lockDurationMs' | 'stalledIntervalMs'>;
  /** The worker process's metrics (builds by outcome, durations, artifact size); without it nothing is counted. */
  metrics?: Metrics;
}

export interface IndexWorker {
  /** Finishes the job in hand, then stops taking jobs and closes connections. */
  close(): Promise<void>;
}

/**
 * How long a worker holding no job lets BullMQ close cleanly before it lets go of its connections. A fresh worker closes
 * in about 0.2 s; one that lived through a failover may wait forever on a command queued for a node that went away
 * (BullMQ's connections retry without limit), though nothing it holds needs finishing.
 */
export const IDLE_CLOSE_GRACE_MS = 2_000;

/** A BullMQ worker that builds indexes: embeds what the shared cache lacks, stores the artifact, promotes it. */
export async function startIndexWorker(options: IndexWorkerOptions, log: Logger): Promise<IndexWorker> {
  if (!redisForm(options.redis)) throw new Error('the index worker needs Redis: set REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES');
  const { keys } = options;
  // The worker listens on no channel, so its bus is one command connection; BullMQ's Worker opens its own two (a
  // blocking BZPOPMIN must not stall other commands, and BullMQ refuses a shared connection that retries commands).
  const bus = new RedisBus({ redis: options.redis, keys, log, connectionName: `toolrouter-worker:${keys.name}:${process.pid}` });
  const { redis } = bus;
  const embedder = await createEmbedder(options.embedding).catch(async (error: unknown) => {
    await bus.close();
    throw error;
  });
  const deps = {
    redis,
    keys,
    embedder,
    cache: new RedisEmbeddingCache(redis, keys),
    lexical: options.lexical,
    hnsw: options.hnsw,
    retention: options.queue.retention,
  };
  // Jobs in hand: close() waits for them, and only for them.
  let active = 0;
  const idleWaiters = new Set<() => void>();
  const untilIdle = () => (active === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.add(resolve)));
  const bullmqConnection = connectRedis(options.redis, `${bus.connectionName}:bullmq`, log, { maxRetriesPerRequest: null });
  const worker = new Worker<BuildJobData, BuildJobResult>(
    keys.indexQueue,
    async (job: Job<BuildJobData>) => {
      active++;
      try {
        log.info({ jobId: job.id, catalogHash: job.data.catalogHash, version: job.data.version, attempt: job.attemptsMade + 1 }, 'index build started');
        const result = await indexBuildSpan({ id: job.id, ...job.data, attempt: job.attemptsMade + 1 }, () => runBuildJob(job.data, deps));
        log.info({ jobId: job.id, ...result }, 'index build finished');
        if (options.metrics) recordBuild(options.metrics, result);
        return result;
      } finally {
        active--;
        if (active === 0) for (const resolve of idleWaiters) resolve();
        if (active === 0) idleWaiters.clear();
      }
    },
    {
      // BullMQ duplicates this connection for its blocking one; on a cluster its keys share the prefix's hash slot.
      connection: bullmqConnection,
      prefix: keys.bullPrefix,
      concurrency: 1,
      lockDuration: options.queue.lockDurationMs,
      stalledInterval: options.queue.stalledIntervalMs,
    },
  );
  worker.on('failed', (job, error) => {
    if (!job) return;
    const final = job.attemptsMade >= (job.opts.attempts ?? 1);
    log.error({ jobId: job.id, err: error, attempt: job.attemptsMade, final }, 'index build failed');
    options.metrics?.indexBuilds.inc({ outcome: 'failed' });
    const store = new ArtifactStore(redis, keys, job.data.model);
    void store
      .publish({ type: 'failed', hash: job.data.catalogHash, error: error.message, final })
      .catch((publishError: unknown) => log.error({ err: publishError }, 'could not announce the failure'));
  });
  worker.on('error', (error) => log.warn({ err: error }, 'index worker error'));
  await worker.waitUntilReady();
  log.info({ queue: keys.indexQueue, model: embedder.modelId }, 'index worker ready');
  return {
    close: async () => {
      // Stops taking jobs first, so none starts while we wait for the one in hand.
      const closing = worker.close().then(
        () => true,
        (error: unknown) => {
          log.warn({ err: error }, 'error while closing the BullMQ worker');
          return true;
        },
      );
      for (;;) {
        await untilIdle();
        let timer: NodeJS.Timeout | undefined;
        const closed = await Promise.race([closing, new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), IDLE_CLOSE_GRACE_MS)))]);
        clearTimeout(timer);
        if (closed) break;
        // A job fetched just as close() began is finished first; otherwise BullMQ waits on Redis for nothing of ours.
        if (active === 0) {
          log.warn({ graceMs: IDLE_CLOSE_GRACE_MS }, 'BullMQ did not close in time while holding no job (a command waits on Redis); closing the connections');
          break;
        }
      }
      // BullMQ leaves a connection it was handed open.
      bullmqConnection.disconnect();
      await bus.close();
    },
  };
}

function recordBuild({ indexBuilds, indexBuildDuration, indexTexts, indexArtifactBytes }: Metrics, result: BuildJobResult): void {
  indexBuilds.inc({ outcome: result.outcome });
  if (result.outcome !== 'built') return;
  indexBuildDuration.observe(result.durationMs / 1000);
  // Texts the shared Redis cache had (or that repeat within the catalog) are not embedded again.
  indexTexts.inc({ cache: 'miss' }, result.embedded);
  indexTexts.inc({ cache: 'hit' }, result.tools - result.embedded);
  indexArtifactBytes.set(result.bytes);
}
