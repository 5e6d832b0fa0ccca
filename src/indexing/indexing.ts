import type { RedisClient } from '../redis/connection.js';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import { LocalStaticSources, RedisStaticSources, type StaticSources } from '../catalog/static-sources.js';
import type { Embedder } from '../embedding/embedder.js';
import type { Metrics } from '../metrics.js';
import type { RedisBus } from '../redis/bus.js';
import { MemoryEmbeddingCache } from './embedding-cache.js';
import { LocalIndexPipeline } from './local-pipeline.js';
import { IndexManager, type IndexPipeline } from './manager.js';
import type { BuildStats, SearchIndex } from './search-index.js';
import { WorkerIndexBuilder } from './worker-builder.js';
import { RedisIndexPipeline } from './redis/redis-pipeline.js';
import type { HnswSettings, LexicalSettings, QueueSettings } from './settings.js';

/** What `startIndexing` takes: the index's slices of the configuration, handed in by the assembly (src/server.ts). */
export interface IndexingOptions {
  separator: string;
  lexical: LexicalSettings;
  hnsw: HnswSettings;
  queue: Pick<QueueSettings, 'attempts' | 'backoffMs' | 'retention' | 'stalledIntervalMs'>;
  /** The router's metrics (builds in this process, swaps, live index size); without it nothing is counted. */
  metrics?: Metrics;
}

export interface Indexing {
  indexes: IndexManager;
  pipeline: IndexPipeline;
  sources: StaticSources;
  /** The bus's command connection (unset in-process), for readiness checks. */
  redis?: RedisClient;
  close(): Promise<void>;
}

/**
 * Sets up how the catalog becomes a live index: through Redis and BullMQ workers when the process has a Redis bus
 * (shared by every API instance), otherwise in this process. Either way the catalog's changes drive it from here on.
 */
export async function startIndexing(
  options: IndexingOptions,
  catalog: Catalog,
  embedder: Embedder,
  log: Logger,
  bus?: RedisBus,
): Promise<Indexing> {
  const { metrics } = options;
  if (!bus) {
    const indexes = new IndexManager(catalog.snapshot());
    const onBuilt = (stats: BuildStats, index: SearchIndex) => {
      metrics?.indexBuildDuration.observe(stats.durationMs / 1000);
      metrics?.indexTexts.inc({ cache: 'miss' }, stats.embedded);
      metrics?.indexTexts.inc({ cache: 'hit' }, stats.tools - stats.embedded);
      log.info({ ...stats, catalogHash: index.catalogHash }, 'index built');
    };
    // Embedding (when the model can run there), BM25 and HNSW in worker threads: a large catalog's build never stalls requests.
    const builder = new WorkerIndexBuilder({
      embedder,
      cache: new MemoryEmbeddingCache(),
      lexical: options.lexical,
      hnsw: options.hnsw,
      onBuilt,
    });
    const pipeline = new LocalIndexPipeline(indexes, builder, { attempts: options.queue.attempts, backoffMs: options.queue.backoffMs });
    follow(catalog, indexes, pipeline, log, metrics);
    return { indexes, pipeline, sources: new LocalStaticSources(catalog), close: () => pipeline.close() };
  }

  try {
    const sources = new RedisStaticSources(catalog, bus, log);
    // Stored static sources first: the catalog must be complete before it is compared with the stored index.
    await sources.start();
    const indexes = new IndexManager(catalog.snapshot());
    const pipeline = new RedisIndexPipeline(indexes, {
      bus,
      model: embedder.modelId,
      separator: options.separator,
      lexical: options.lexical,
      log,
      job: { attempts: options.queue.attempts, backoffMs: options.queue.backoffMs },
      retention: options.queue.retention,
      stalledIntervalMs: options.queue.stalledIntervalMs,
    });
    await pipeline.start();
    follow(catalog, indexes, pipeline, log, metrics);
    // The bus is the process's: whoever opened it closes it.
    return { indexes, pipeline, sources, redis: bus.redis, close: () => pipeline.close() };
  } catch (error) {
    throw new Error(`could not start the Redis index pipeline at ${bus.location}: ${(error as Error).message}`, { cause: error });
  }
}

function follow(catalog: Catalog, indexes: IndexManager, pipeline: IndexPipeline, log: Logger, metrics: Metrics | undefined): void {
  indexes.on('failed', (error, catalogHash) => log.error({ err: error, catalogHash }, 'index build failed'));
  indexes.on('swapped', (index) => {
    metrics?.indexSwaps.inc();
    metrics?.indexTools.set(index.size);
  });
  const update = (snapshot = catalog.snapshot()) =>
    void pipeline.update(snapshot).catch((error: unknown) => log.error({ err: error }, 'index update failed'));
  catalog.on('change', update);
  update();
}
