import { z } from 'zod';

/*
 * How this process reaches Redis: one of three forms (a URL, Sentinel, Cluster), each with optional TLS. Unset: no
 * Redis (the API indexes in-process). Read by src/redis/connection.ts, which opens every connection.
 */

const redisUrl = z
  .string()
  .url()
  .refine((value) => /^rediss?:\/\//i.test(value), 'must be a redis:// or rediss:// URL');

const hostPort = z.string().regex(/^[^\s:]+:\d{1,5}$/, 'must be host:port');

/** Files, read when connecting: a private CA, and a client certificate when the server asks for one. */
const tlsSchema = z
  .object({
    ca: z.string().min(1).optional(),
    cert: z.string().min(1).optional(),
    key: z.string().min(1).optional(),
    /** The name the server's certificate is checked against (SNI), when it is not the host connected to. */
    servername: z.string().min(1).optional(),
  })
  .strict()
  .refine((tls) => (tls.cert === undefined) === (tls.key === undefined), 'cert and key go together (a client certificate needs both)');

const sentinelSchema = z
  .object({
    sentinels: z.array(hostPort).min(1, 'name at least one sentinel'),
    /** The master group's name, as in the sentinels' `sentinel monitor <name> ...`. */
    name: z.string().min(1),
    /** The master's and replicas' password (AUTH), and the sentinels' own (often none). */
    password: z.string().optional(),
    username: z.string().optional(),
    sentinelPassword: z.string().optional(),
    sentinelUsername: z.string().optional(),
    db: z.number().int().min(0).max(15).optional(),
  })
  .strict();

const clusterSchema = z
  .object({
    /** Some of the cluster's nodes (the rest are discovered); credentials and rediss:// come from the first URL. */
    nodes: z.array(redisUrl).min(1, 'name at least one cluster node'),
  })
  .strict();

export const redisSettingsSchema = z
  .object({
    /** One Redis (or a proxy in front of several): `redis://[user:password@]host:port[/db]`, `rediss://` for TLS. */
    url: redisUrl.optional(),
    tls: tlsSchema.optional(),
    sentinel: sentinelSchema.optional(),
    cluster: clusterSchema.optional(),
    /**
     * How long a write on a request's path (catalog sources, keys, runtime servers, search settings) and the readiness
     * probe wait for Redis before answering 503: a client hears "try later" within its own budget, not after ioredis's
     * reconnect retries (5-15 s). While the probe or the connection already says Redis is away, writes are refused at
     * once and nothing is sent. Default DEFAULT_COMMAND_TIMEOUT_MS.
     */
    commandTimeoutMs: z.number().int().min(50).max(60_000).optional(),
    /**
     * How often the API's keyed read/write on toolrouter's hash slot (cluster) or the master (Sentinel) runs in the
     * background. Default DEFAULT_HEALTH_CHECK_MS.
     */
    healthCheckMs: z.number().int().min(100).max(600_000).optional(),
  })
  .strict()
  .superRefine((settings, ctx) => {
    const forms = (['url', 'sentinel', 'cluster'] as const).filter((form) => settings[form] !== undefined);
    if (forms.length > 1) ctx.addIssue({ code: 'custom', message: `give one of url, sentinel and cluster, not ${forms.join(' and ')}` });
  })
  .prefault({});

export type RedisSettings = z.infer<typeof redisSettingsSchema>;

/** redis.commandTimeoutMs when unset: well inside the 2 s a client should wait to hear "try later". */
export const DEFAULT_COMMAND_TIMEOUT_MS = 1_000;
/** redis.healthCheckMs when unset. */
export const DEFAULT_HEALTH_CHECK_MS = 1_000;
export type RedisForm = 'url' | 'sentinel' | 'cluster';

/** Which form is configured; undefined: no Redis. */
export function redisForm(settings: RedisSettings): RedisForm | undefined {
  if (settings.cluster) return 'cluster';
  if (settings.sentinel) return 'sentinel';
  if (settings.url) return 'url';
  return undefined;
}

const FORMS = ['url', 'sentinel', 'cluster'];

/**
 * The `redis` settings from the environment: REDIS_URL, REDIS_SENTINELS (host:port,...) with REDIS_SENTINEL_NAME,
 * REDIS_CLUSTER_NODES (URL,...); REDIS_PASSWORD / REDIS_SENTINEL_PASSWORD for Sentinel; REDIS_TLS_CA / _CERT / _KEY /
 * _SERVERNAME for TLS. Empty variables count as unset.
 */
export function redisFromEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const list = (value: string | undefined) => (value ? value.split(',').map((item) => item.trim()).filter(Boolean) : undefined);
  const layer: Record<string, unknown> = {};
  if (env.REDIS_URL) layer.url = env.REDIS_URL;
  if (env.REDIS_SENTINELS || env.REDIS_SENTINEL_NAME) {
    layer.sentinel = definedOnly({
      sentinels: list(env.REDIS_SENTINELS),
      name: env.REDIS_SENTINEL_NAME || undefined,
      password: env.REDIS_PASSWORD || undefined,
      sentinelPassword: env.REDIS_SENTINEL_PASSWORD || undefined,
    });
  }
  if (env.REDIS_CLUSTER_NODES) layer.cluster = { nodes: list(env.REDIS_CLUSTER_NODES) };
  const tls = definedOnly({ ca: env.REDIS_TLS_CA || undefined, cert: env.REDIS_TLS_CERT || undefined, key: env.REDIS_TLS_KEY || undefined, servername: env.REDIS_TLS_SERVERNAME || undefined });
  if (Object.keys(tls).length > 0) layer.tls = tls;
  return layer;
}

/**
 * One configuration layer's `redis`, with the older top-level `redisUrl` (config files and overrides written before
 * `redis.url`) folded in, so they keep working.
 */
export function redisOfLayer(layer: Record<string, unknown>): Record<string, unknown> | undefined {
  const redis = isObject(layer.redis) ? { ...layer.redis } : undefined;
  if (typeof layer.redisUrl !== 'string' || layer.redisUrl === '') return redis;
  return { ...redis, url: redis?.url ?? layer.redisUrl };
}

/**
 * A later layer (environment over file, overrides over both) that names a form replaces the earlier layer's form: a
 * REDIS_URL in the environment overrides a cluster in the file rather than conflicting with it. TLS settings merge.
 */
export function layerRedis(base: Record<string, unknown> | undefined, extra: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!extra) return base;
  const result: Record<string, unknown> = { ...base };
  if (FORMS.some((form) => extra[form] !== undefined)) for (const form of FORMS) delete result[form];
  for (const [name, value] of Object.entries(extra)) {
    result[name] = isObject(result[name]) && isObject(value) ? { ...result[name], ...value } : value;
  }
  return result;
}

function definedOnly(values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
