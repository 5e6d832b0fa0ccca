import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import { z } from 'zod';
/*
 * The configuration is assembled here from the slices each module owns (src/<module>/settings.ts: schema and
 * defaults); this file adds only the process-level keys (port, host, adminKey, ...), the checks that span slices, and
 * the loading from file and environment. Modules import their own settings file, never this one: the server and the
 * CLI hand each module its slice (`npm run lint` checks the direction, see .dependency-cruiser.cjs).
 */
import { analyticsSettingsSchema } from '../analytics/settings.js';
import { auditSettingsSchema } from '../audit/settings.js';
import { authSettingsSchema, keysSettingsSchema, securitySettingsSchema } from '../auth/settings.js';
import { catalogSettingsSchema, limitsSettingsSchema } from '../catalog/settings.js';
import { chatSettingsSchema } from '../chat/settings.js';
import { embeddingSettingsSchema } from '../embedding/settings.js';
import { feedbackSettingsSchema } from '../feedback/settings.js';
import { queueSettingsSchema, workerSettingsSchema } from '../indexing/settings.js';
import { guardrailsSettingsSchema } from '../guardrails/settings.js';
import { mcpSettingsSchema } from '../mcp/settings.js';
import { policySettingsSchema } from '../policy/settings.js';
import { staticTransformProblems, transformServer } from '../mcp/upstream/transform.js';
import { defaultModelsDir } from '../package-root.js';
import { layerRedis, redisFromEnv, redisOfLayer, redisSettingsSchema } from '../redis/settings.js';
import { searchSettingsSchema } from '../search/settings.js';
import { issueProblems, unknownSettingProblem, unknownSettings } from './problems.js';

export const configSchema = z.object({
  port: z.coerce.number().int().min(0).max(65535).default(8080),
  host: z.string().default('127.0.0.1'),
  /** Where Redis is (a URL, Sentinel or Cluster, with TLS); unset: no Redis. The older top-level `redisUrl` is folded in. */
  redis: redisSettingsSchema,
  adminKey: z.string().min(16, 'adminKey must be at least 16 characters').optional(),
  /**
   * Where a single node (no Redis) keeps what must survive a restart: MCP servers added with PUT /v1/mcp/servers
   * (mcp-servers.json) and OAuth grants of upstream servers (oauth.json, sealed with TOOLROUTER_SECRET_KEY).
   */
  stateDir: z.string().min(1).optional(),
  /** Inbound identity besides API keys: `auth.oauth` accepts JWT access tokens of an OAuth authorization server. */
  auth: authSettingsSchema,
  keys: keysSettingsSchema,
  security: securitySettingsSchema,
  queue: queueSettingsSchema,
  /** GET /ready. */
  ready: z
    .object({
      /**
       * Not ready once the live index has not been built for the current catalog for this long (a lost build, Redis
       * restarted empty); searches are still answered from the older index meanwhile.
       */
      indexGraceMs: z.number().int().min(0).max(86_400_000).default(300_000),
    })
    .prefault({}),
  worker: workerSettingsSchema,
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * SIGTERM to `serve`: in-flight requests get this long to finish before the process exits anyway (code 1). Under
   * the 30 s an orchestrator usually waits before SIGKILL, so the backstop fires first and says what it cut.
   */
  shutdownTimeoutMs: z.number().int().min(0).max(3_600_000).default(25_000),
  /** Rolling restarts behind a load balancer (src/shutdown.ts). */
  shutdown: z
    .object({
      /**
       * SIGTERM to `serve`: for this long /ready answers 503 while every request is still served, so the balancer's
       * health check takes the instance out before it stops accepting. The default covers a check every 2 s that
       * takes a server out after 3 failures (up to 2 s until the first failing check, then 2 × 2 s) with 2 s to spare.
       * 0: stop accepting at once (one instance, no balancer). shutdownTimeoutMs counts from the end of the drain.
       */
      drainMs: z.number().int().min(0).max(600_000).default(8_000),
    })
    .prefault({}),
  /**
   * How far V8 lets the heap grow past what its last full collection kept before it collects again, in percent, for
   * `serve` and `worker` (V8's --heap-growing-percent, set at start). V8's own choice (0) is up to 4×: the garbage of a
   * 100k-tool catalog PUT and build stayed resident and the peak RSS was ~1.08 GiB; at 20 it was ~0.93 GiB with status
   * and search as quick (BENCHMARKS.md). Higher: fewer collections, more memory.
   */
  heapGrowingPercent: z.number().int().min(0).max(1000).default(20),
  /** Largest accepted request body; catalogs of many thousand tools are several MB. */
  bodyLimit: z.string().default('20mb'),
  limits: limitsSettingsSchema,
  catalog: catalogSettingsSchema,
  embedding: embeddingSettingsSchema({ modelsDir: () => defaultModelsDir() }),
  search: searchSettingsSchema,
  feedback: feedbackSettingsSchema,
  /** The search log (src/analytics): every search, what it found and the tool then called; GET /v1/analytics/*. */
  analytics: analyticsSettingsSchema,
  upstreamLlmUrl: z.string().url().optional(),
  /** Anthropic-compatible base URL for `/v1/messages` (as ANTHROPIC_BASE_URL is written: `https://api.anthropic.com`). */
  upstreamAnthropicUrl: z.string().url().optional(),
  chat: chatSettingsSchema,
  mcp: mcpSettingsSchema,
  /** Cedar policies over every tool call, resource read and prompt (src/policy, docs/governance.md). */
  policy: policySettingsSchema,
  /** Credentials kept out of tool calls' arguments and results (src/guardrails). */
  guardrails: guardrailsSettingsSchema,
  /** One hash-chained record per call attempt on every face (src/audit, docs/audit.md). */
  audit: auditSettingsSchema,
}).superRefine((config, ctx) => {
  // Tokens narrow what a caller sees; an open service (no ADMIN_KEY) lets everyone in without one, so they would not.
  if (config.auth.oauth && !config.adminKey) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'oauth'], message: 'auth.oauth needs adminKey (ADMIN_KEY): without it the service is open and tokens would protect nothing' });
  }
  // What can be checked before the upstreams list their tools; the rest is reported per server (GET /v1/mcp/servers).
  for (const [tool, spec] of Object.entries(config.mcp.transforms)) {
    const path = ['mcp', 'transforms', tool];
    for (const message of staticTransformProblems(tool, spec)) ctx.addIssue({ code: 'custom', path, message });
    if (transformServer(tool, Object.keys(config.mcp.servers), config.catalog.separator) === undefined && config.catalog.separator !== '') {
      ctx.addIssue({ code: 'custom', path, message: `tool "${tool}": no configured MCP server (mcp.servers) has tools named "<server>${config.catalog.separator}..."` });
    }
  }
});

export type Config = z.infer<typeof configSchema>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';

  /** Every problem found, one per entry (`toolrouter config check` prints them one a line). */
  constructor(
    message: string,
    readonly problems: string[] = [message],
  ) {
    super(message);
  }
}

/**
 * Effective configuration: defaults, then the config file (`TOOLROUTER_CONFIG`, YAML or JSON), then environment
 * variables, then explicit overrides (tests and the CLI).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Record<string, unknown> = {}): Config {
  const { config, problems } = validateConfig(configInput(env, overrides));
  if (!config) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`, problems);
  return config;
}

/**
 * The configuration from its input, or every problem with it. An unknown setting at any depth is a problem like a bad
 * value (a misspelled `mcp.serverz` would otherwise leave every upstream out without a word).
 */
export function validateConfig(input: Record<string, unknown>): { config: Config | undefined; problems: string[] } {
  const problems = unknownSettings(input, configSchema).map((path) => unknownSettingProblem(path, configSchema, input));
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) problems.push(...issueProblems(parsed.error.issues, configSchema, input));
  return problems.length > 0 ? { config: undefined, problems } : { config: parsed.data, problems };
}

/** The configuration as given (file, environment, overrides merged), before validation and defaults. */
export function configInput(env: NodeJS.ProcessEnv = process.env, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const file = env.TOOLROUTER_CONFIG ? readConfigFile(env.TOOLROUTER_CONFIG) : {};
  const fromEnv = definedOnly({
    port: env.PORT ? parsePort('PORT', env.PORT) : undefined,
    host: env.HOST,
    adminKey: env.ADMIN_KEY || undefined,
    mcp: env.TOOLROUTER_SECRET_KEY ? { oauth: { secretKey: env.TOOLROUTER_SECRET_KEY } } : undefined,
    logLevel: env.LOG_LEVEL,
    upstreamLlmUrl: env.UPSTREAM_LLM_URL || undefined,
    upstreamAnthropicUrl: env.UPSTREAM_ANTHROPIC_URL || undefined,
    chat: env.UPSTREAM_LLM_KEY || env.UPSTREAM_ANTHROPIC_KEY ? definedOnly({ upstreamKey: env.UPSTREAM_LLM_KEY || undefined, anthropicUpstreamKey: env.UPSTREAM_ANTHROPIC_KEY || undefined }) : undefined,
    worker: env.WORKER_METRICS_PORT ? { metricsPort: parsePort('WORKER_METRICS_PORT', env.WORKER_METRICS_PORT) } : undefined,
  });
  const embeddingEnv = definedOnly({
    provider: env.EMBEDDING_PROVIDER || undefined,
    baseUrl: env.EMBEDDING_BASE_URL || undefined,
    apiKey: env.EMBEDDING_API_KEY || undefined,
    dimensions: env.EMBEDDING_DIMENSIONS || undefined,
    model: env.EMBEDDING_MODEL || undefined,
    dtype: env.EMBEDDING_DTYPE || undefined,
    allowRemoteModels: env.ALLOW_REMOTE_MODELS === undefined ? undefined : parseBoolean('ALLOW_REMOTE_MODELS', env.ALLOW_REMOTE_MODELS),
    modelsDir: env.MODELS_DIR || undefined,
  });
  const rerankEnv = env.RERANK_API_KEY ? { search: { rerank: { apiKey: env.RERANK_API_KEY } } } : {};
  const merged = deepMerge(deepMerge(deepMerge(deepMerge(file, fromEnv), { embedding: embeddingEnv }), rerankEnv), overrides);
  // Redis's forms replace each other layer by layer (a REDIS_URL overrides a file's cluster) instead of merging.
  const redis = layerRedis(layerRedis(redisOfLayer(file), redisFromEnv(env)), redisOfLayer(overrides));
  delete merged.redisUrl;
  if (redis) merged.redis = redis;
  else delete merged.redis;
  return merged;
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read config file ${file}: ${(error as Error).message}`);
  }
  try {
    const parsed: unknown = YAML.parse(text);
    if (parsed === null || parsed === undefined) return {};
    if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('top level must be a mapping');
    return parsed as Record<string, unknown>;
  } catch (error) {
    throw new ConfigError(`config file ${file} is not valid YAML/JSON: ${(error as Error).message}`);
  }
}

/** Named after the variable, with the value given: the schema would only see NaN. */
function parsePort(name: string, value: string): number {
  const port = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || port > 65535) throw new ConfigError(`${name} must be a port number (0-65535), got "${value}"`);
  return port;
}

function parseBoolean(name: string, value: string): boolean {
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off|)$/i.test(value)) return false;
  throw new ConfigError(`${name} must be true or false, got "${value}"`);
}

function definedOnly(values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined));
}

function deepMerge(base: Record<string, unknown>, extra: Record<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(extra)) {
    const existing = result[key];
    result[key] =
      isPlainObject(existing) && isPlainObject(value) ? deepMerge(existing, value) : value;
  }
  return result;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
