/**
 * The index's settings (YAML `search.lexical`, `search.hnsw`, `queue`, `worker`): schemas and defaults. The shapes are
 * the ones `LexicalIndex` and the vector index take (`LexicalSettings`, `HnswSettings`); the schemas below add only
 * bounds and defaults, and `satisfies` keeps them from drifting apart. `src/config/` assembles these into the full
 * configuration; nothing here imports it.
 */
import { z } from 'zod';
import { DEFAULT_LEXICAL, type LexicalSettings } from './lexical.js';
import { DEFAULT_HNSW, type HnswSettings } from './vector.js';

export const lexicalSettingsSchema = z
  .object({
    fieldWeights: z
      .object({
        name: z.number().min(0),
        title: z.number().min(0),
        description: z.number().min(0),
        server: z.number().min(0),
        params: z.number().min(0),
        /** The source's description (catalog `description`, an upstream's instructions), on each of its tools. */
        context: z.number().min(0).default(DEFAULT_LEXICAL.fieldWeights.context),
      })
      .default(DEFAULT_LEXICAL.fieldWeights),
    bm25: z
      .object({ k: z.number().min(0).max(10), b: z.number().min(0).max(1), d: z.number().min(0).max(10) })
      .default(DEFAULT_LEXICAL.bm25),
    stem: z.boolean().default(DEFAULT_LEXICAL.stem),
    stopWords: z.boolean().default(DEFAULT_LEXICAL.stopWords),
  })
  .prefault({}) satisfies z.ZodType<LexicalSettings>;

export const hnswSettingsSchema = z
  .object({
    m: z.number().int().min(2).max(128),
    efConstruction: z.number().int().min(8).max(2000),
    efSearch: z.number().int().min(1).max(10_000),
    exactThreshold: z.number().int().min(0),
  })
  .default(DEFAULT_HNSW) satisfies z.ZodType<HnswSettings>;

/** The shared index pipeline (only with redisUrl). */
export const queueSettingsSchema = z
  .object({
    /** Prefix of every Redis key, channel and queue, so deployments or test runs can share one Redis. */
    prefix: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/).default('toolrouter'),
    /** Tries per index build, the first included; the in-process pipeline (no redisUrl) uses these two as well. */
    attempts: z.number().int().min(1).max(100).default(3),
    /** Wait before the second try, doubled for each one after. */
    backoffMs: z.number().int().min(0).default(1_000),
    /** How long a worker may go silent before its job counts as stalled and another worker takes it. */
    lockDurationMs: z.number().int().min(1_000).default(60_000),
    stalledIntervalMs: z.number().int().min(1_000).default(30_000),
    /**
     * What Redis keeps (src/indexing/redis/retention.ts): the newest catalog snapshots and promoted indexes, bounded in
     * count and bytes; the newest snapshot, the live index's snapshot and the current index are always kept.
     */
    retention: z
      .object({
        snapshots: z.number().int().min(1).max(1_000).default(3),
        snapshotBytes: z.number().int().min(1).default(256 * 1024 * 1024),
        indexes: z.number().int().min(1).max(100).default(2),
        indexBytes: z.number().int().min(1).default(2 * 1024 * 1024 * 1024),
      })
      .prefault({}),
    /** Milliseconds between checks that Redis still holds this deployment's data (see RedisKeys.generation). */
    generationCheckMs: z.number().int().min(100).max(600_000).default(5_000),
  })
  .prefault({});

/** The index worker process (`toolrouter worker`). */
export const workerSettingsSchema = z
  .object({
    /** Serves GET /metrics (and /health) on this port when set (env WORKER_METRICS_PORT); 0 picks a free port. */
    metricsPort: z.coerce.number().int().min(0).max(65535).optional(),
    /** Host the metrics endpoint binds to (the worker has no admin key: keep it off public interfaces). */
    metricsHost: z.string().default('0.0.0.0'),
    /** SIGTERM waits this long for the job in hand (a 100k-tool build takes over a minute) before exiting anyway. */
    shutdownTimeoutMs: z.number().int().min(0).max(3_600_000).default(300_000),
  })
  .prefault({});

export type QueueSettings = z.infer<typeof queueSettingsSchema>;
export type WorkerSettings = z.infer<typeof workerSettingsSchema>;
export type { LexicalSettings, HnswSettings };

/** Compile-time check that each schema yields exactly the index's own settings type: no field missing, none extra. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _lexicalIsLexicalSettings: Same<z.output<typeof lexicalSettingsSchema>, LexicalSettings> = true;
const _hnswIsHnswSettings: Same<z.output<typeof hnswSettingsSchema>, HnswSettings> = true;
