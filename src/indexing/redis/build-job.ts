import { decodeSnapshot } from '../../catalog/snapshot-codec.js';
import type { Embedder } from '../../embedding/embedder.js';
import type { RedisClient, RedisKeys } from '../../redis/connection.js';
import { serializeIndex } from '../artifact.js';
import type { EmbeddingCache } from '../embedding-cache.js';
import type { LexicalSettings } from '../lexical.js';
import { buildSearchIndex } from '../search-index.js';
import type { HnswSettings } from '../vector.js';
import { ArtifactStore } from './artifact-store.js';
import type { Retention } from './retention.js';

/** What the API puts on the queue: which snapshot, as of which catalog version, for which model. */
export interface BuildJobData {
  catalogHash: string;
  version: number;
  model: string;
  /** Build even when an artifact for this snapshot exists (POST /v1/index/rebuild). */
  force?: boolean;
  /** W3C trace context of the request that changed the catalog, when tracing is on: the worker's build span is its child. */
  trace?: Record<string, string>;
}

export type BuildJobResult =
  | { outcome: 'built'; tools: number; embedded: number; durationMs: number; bytes: number; promoted: boolean }
  | { outcome: 'reused'; promoted: boolean }
  | { outcome: 'superseded'; latest: string };

export interface BuildJobOptions {
  redis: RedisClient;
  keys: RedisKeys;
  embedder: Embedder;
  cache: EmbeddingCache;
  lexical: LexicalSettings;
  hnsw: HnswSettings;
  retention?: Retention;
}

/**
 * One index build, as the worker runs it. A job whose snapshot is no longer the newest is skipped: its catalog is
 * gone, and the newer snapshot has (or will have) its own job. The version promoted is the newest one this hash was
 * published under, so a catalog that went A → B → A promotes A over B.
 */
export async function runBuildJob(data: BuildJobData, options: BuildJobOptions): Promise<BuildJobResult> {
  const { redis, keys, embedder } = options;
  if (data.model !== embedder.modelId) {
    throw new Error(`job is for model ${data.model} but this worker embeds with ${embedder.modelId}`);
  }
  const store = new ArtifactStore(redis, keys, data.model, options.retention);
  const latest = await readLatest(redis, keys);
  if (latest && latest.hash !== data.catalogHash && latest.version > data.version) {
    await store.publish({ type: 'superseded', hash: data.catalogHash });
    return { outcome: 'superseded', latest: latest.hash };
  }
  const version = Math.max(data.version, latest?.hash === data.catalogHash ? latest.version : 0);
  if (!data.force && (await store.has(data.catalogHash))) {
    return { outcome: 'reused', promoted: await store.promote(data.catalogHash, version, new Date().toISOString()) };
  }
  const encoded = await redis.get(keys.catalogSnapshot(data.catalogHash));
  if (!encoded) throw new Error(`catalog snapshot ${data.catalogHash} is not in Redis (expired, or never stored)`);
  const snapshot = decodeSnapshot(encoded);
  const { index, stats } = await buildSearchIndex(snapshot, options);
  const artifact = serializeIndex(index, options.hnsw);
  await store.put(data.catalogHash, artifact);
  const promoted = await store.promote(data.catalogHash, version, index.builtAt);
  // A newer index went live while this one was built: nothing will load this one.
  if (!promoted) await store.discard(data.catalogHash);
  return { outcome: 'built', ...stats, bytes: artifact.length, promoted };
}

export async function readLatest(redis: RedisClient, keys: RedisKeys): Promise<{ hash: string; version: number } | null> {
  const raw = await redis.get(keys.catalogLatest);
  return raw ? (JSON.parse(raw) as { hash: string; version: number }) : null;
}
