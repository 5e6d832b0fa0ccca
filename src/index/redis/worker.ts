import { Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../../config/config.js';
import { createEmbedder } from '../../embedding/embedder.js';
import { indexArtifactBytes, indexBuildDuration, indexBuilds, indexTexts } from '../../metrics.js';
import { RedisKeys } from '../../redis.js';
import { RedisBus } from '../../redis/bus.js';
import { ArtifactStore } from './artifact-store.js';
import { runBuildJob, type BuildJobData, type BuildJobResult } from './build-job.js';
import { RedisEmbeddingCache } from './embedding-cache.js';

export interface IndexWorker {
  /** Finishes the job in hand, then stops taking jobs and closes connections. */
  close(): Promise<void>;
}

/** A BullMQ worker that builds indexes: embeds what the shared cache lacks, stores the artifact, promotes it. */
export async function startIndexWorker(config: Config, log: Logger): Promise<IndexWorker> {
  if (!config.redisUrl) throw new Error('the index worker needs REDIS_URL');
  const keys = new RedisKeys(config.queue.prefix);
  // The worker listens on no channel, so its bus is one command connection; BullMQ's Worker opens its own two (a
  // blocking BZPOPMIN must not stall other commands, and BullMQ refuses a shared connection that retries commands).
  const bus = new RedisBus({ url: config.redisUrl, keys, log, connectionName: `toolrouter-worker:${keys.prefix}:${process.pid}` });
  const { redis } = bus;
  const embedder = await createEmbedder(config.embedding).catch(async (error: unknown) => {
    await bus.close();
    throw error;
  });
  const deps = {
    redis,
    keys,
    embedder,
    cache: new RedisEmbeddingCache(redis, keys),
    lexical: config.search.lexical,
    hnsw: config.search.hnsw,
    retention: config.queue.retention,
  };
  const worker = new Worker<BuildJobData, BuildJobResult>(
    keys.indexQueue,
    async (job: Job<BuildJobData>) => {
      log.info({ jobId: job.id, catalogHash: job.data.catalogHash, version: job.data.version, attempt: job.attemptsMade + 1 }, 'index build started');
      const result = await runBuildJob(job.data, deps);
      log.info({ jobId: job.id, ...result }, 'index build finished');
      recordBuild(result);
      return result;
    },
    {
      connection: { url: config.redisUrl, maxRetriesPerRequest: null, connectionName: `${bus.connectionName}:bullmq` },
      concurrency: 1,
      lockDuration: config.queue.lockDurationMs,
      stalledInterval: config.queue.stalledIntervalMs,
    },
  );
  worker.on('failed', (job, error) => {
    if (!job) return;
    const final = job.attemptsMade >= (job.opts.attempts ?? 1);
    log.error({ jobId: job.id, err: error, attempt: job.attemptsMade, final }, 'index build failed');
    indexBuilds.inc({ outcome: 'failed' });
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
      await worker.close();
      await bus.close();
    },
  };
}

function recordBuild(result: BuildJobResult): void {
  indexBuilds.inc({ outcome: result.outcome });
  if (result.outcome !== 'built') return;
  indexBuildDuration.observe(result.durationMs / 1000);
  // Texts the shared Redis cache had (or that repeat within the catalog) are not embedded again.
  indexTexts.inc({ cache: 'miss' }, result.embedded);
  indexTexts.inc({ cache: 'hit' }, result.tools - result.embedded);
  indexArtifactBytes.set(result.bytes);
}
