import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import { z } from 'zod';
import { OFFLINE_MODEL_ID } from '../embedding/embedder.js';
import { DEFAULT_LEXICAL } from '../index/lexical.js';
import { DEFAULT_HNSW } from '../index/vector.js';
import { DEFAULT_SEARCH_SETTINGS, SEARCH_MODES } from '../search/search.js';
import { DEFAULT_FEEDBACK_SETTINGS } from '../feedback/types.js';
import { DEFAULT_ACTIVATION_THRESHOLDS } from '../search/activation.js';
import { staticTransformProblems, toolTransformSchema, transformServer } from '../mcp/transform.js';
import { defaultModelsDir } from '../package-root.js';

/** A weight left out keeps its default, as a partial `weights` does in the settings API and in a search request. */
const weightsSchema = z
  .object({
    bm25: z.number().min(0).max(1000).default(DEFAULT_SEARCH_SETTINGS.weights.bm25),
    vector: z.number().min(0).max(1000).default(DEFAULT_SEARCH_SETTINGS.weights.vector),
  })
  .refine((weights) => weights.bm25 + weights.vector > 0, 'at least one weight must be positive');

const toolSchema = z.looseObject({ name: z.string() });

/** An upstream MCP server: a command to spawn (stdio) or a streamable HTTP endpoint. */
const mcpServerSchema = z.union([
  z
    .object({
      command: z.string().min(1),
      args: z.array(z.string()).default([]),
      /** Added to a minimal inherited environment (PATH, HOME, ...), not to toolrouter's whole environment. */
      env: z.record(z.string(), z.string()).default({}),
      cwd: z.string().optional(),
    })
    .strict(),
  z.object({ url: z.string().url(), headers: z.record(z.string(), z.string()).default({}) }).strict(),
], { error: 'an MCP server is {command, args?, env?, cwd?} (stdio) or {url, headers?} (streamable HTTP)' });

export const configSchema = z.object({
  port: z.coerce.number().int().min(0).max(65535).default(8080),
  host: z.string().default('127.0.0.1'),
  redisUrl: z.string().url().optional(),
  adminKey: z.string().min(16, 'adminKey must be at least 16 characters').optional(),
  /** Virtual API keys (POST /key/generate): what a new key gets when the request does not say. */
  keys: z
    .object({
      defaults: z
        .object({
          allowed_servers: z.array(z.string().min(1)).optional(),
          allowed_tools: z.array(z.string().min(1)).optional(),
          tool_search_enabled: z.boolean().default(true),
          rpm_limit: z.number().int().min(1).optional(),
          /** Lifetime of a new key, like "30d"; unset: keys do not expire. */
          duration: z.string().regex(/^\d{1,9}[smhd]$/, 'duration is a number and a unit: 30s, 15m, 12h, 30d').optional(),
        })
        .strict()
        .prefault({}),
    })
    .prefault({}),
  /** Limits against abuse; all of them apply to every face (REST, /mcp, chat proxy). */
  security: z
    .object({
      /** Requests per minute per client address; 0: off. */
      perIpPerMinute: z.number().int().min(0).default(0),
      /** Failed key checks per minute per client address before it is refused (429) for the rest of the minute; 0: off. */
      authFailuresPerIpPerMinute: z.number().int().min(0).default(30),
      /** Client address from X-Forwarded-For (Express's `trust proxy`: true, a hop count, or addresses); only behind a proxy you run. */
      trustProxy: z.union([z.boolean(), z.number().int().min(0), z.string()]).default(false),
      /** GET /metrics without a key even when ADMIN_KEY is set (for a scraper on a private network). */
      publicMetrics: z.boolean().default(false),
      /**
       * Key lookups and rate counters wait at most this long for Redis; after a failure or timeout they use this
       * instance's memory for redisCooldownMs without asking Redis (so an outage costs one timeout, not one per request).
       */
      redisTimeoutMs: z.number().int().min(10).max(60_000).default(1_000),
      redisCooldownMs: z.number().int().min(0).max(600_000).default(5_000),
    })
    .prefault({}),
  /** The shared index pipeline (only with redisUrl). */
  queue: z
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
       * What Redis keeps (src/index/redis/retention.ts): the newest catalog snapshots and promoted indexes, bounded in
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
    .prefault({}),
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
  /** The index worker process (`toolrouter worker`). */
  worker: z
    .object({
      /** Serves GET /metrics (and /health) on this port when set (env WORKER_METRICS_PORT); 0 picks a free port. */
      metricsPort: z.coerce.number().int().min(0).max(65535).optional(),
      /** Host the metrics endpoint binds to (the worker has no admin key: keep it off public interfaces). */
      metricsHost: z.string().default('0.0.0.0'),
      /** SIGTERM waits this long for the job in hand (a 100k-tool build takes over a minute) before exiting anyway. */
      shutdownTimeoutMs: z.number().int().min(0).max(3_600_000).default(300_000),
    })
    .prefault({}),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * SIGTERM to `serve`: in-flight requests get this long to finish before the process exits anyway (code 1). Under
   * the 30 s an orchestrator usually waits before SIGKILL, so the backstop fires first and says what it cut.
   */
  shutdownTimeoutMs: z.number().int().min(0).max(3_600_000).default(25_000),
  /** Largest accepted request body; catalogs of many thousand tools are several MB. */
  bodyLimit: z.string().default('20mb'),
  /**
   * Bounds on untrusted structure, checked before any work is done on it (src/http/json-depth.ts,
   * src/catalog/schema-limits.ts): a request over one is a 400 that changes nothing.
   */
  limits: z
    .object({
      /** Deepest nesting of arrays and objects in any JSON request body (every route, chat proxy included). */
      jsonDepth: z.number().int().min(8).max(10_000).default(64),
      /** Largest tool inputSchema/outputSchema, as JSON text. */
      schemaBytes: z.number().int().min(1_024).max(100_000_000).default(256 * 1024),
      /** Most entries of any one array inside a schema (`enum`, `required`, `anyOf`, `items` lists...). */
      schemaArrayItems: z.number().int().min(1).max(10_000_000).default(1_000),
      /** Most keys of any one object inside a schema (`properties`, `$defs`...). */
      schemaObjectKeys: z.number().int().min(1).max(10_000_000).default(1_000),
      /** Longest `pattern` / `patternProperties` regular expression in a schema (run with RE2). */
      schemaPatternLength: z.number().int().min(1).max(1_000_000).default(1_000),
    })
    .prefault({}),
  catalog: z
    .object({
      separator: z.string().max(8).default('__'),
      /** Static sources loaded at start: source name → MCP tools. */
      sources: z.record(z.string(), z.array(toolSchema)).default({}),
    })
    .prefault({}),
  embedding: z
    .object({
      /** `transformers`: a local transformers.js model; `openai`: an OpenAI-compatible POST /v1/embeddings server. */
      provider: z.enum(['transformers', 'openai']).default('transformers'),
      model: z.string().min(1).default(OFFLINE_MODEL_ID),
      /** Default: see defaultModelsDir() (the package's models/, or the user's cache when that is not writable). */
      modelsDir: z.string().default(() => defaultModelsDir()),
      allowRemoteModels: z.boolean().default(false),
      batchSize: z.number().int().min(1).max(4096).default(64),
      // Per-model settings; unset fields come from the model's preset (src/embedding/presets.ts).
      pooling: z.enum(['mean', 'cls', 'last']).optional(),
      normalize: z.boolean().optional(),
      queryPrefix: z.string().max(1_000).optional(),
      documentPrefix: z.string().max(1_000).optional(),
      maxTokens: z.number().int().min(1).max(131_072).optional(),
      quantized: z.boolean().optional(),
      // The openai provider.
      baseUrl: z.string().url().optional(),
      /** From EMBEDDING_API_KEY; keep it out of config files. */
      apiKey: z.string().min(1).optional(),
      dimensions: z.coerce.number().int().min(1).max(65_536).optional(),
      concurrency: z.number().int().min(1).max(64).default(4),
      retries: z.number().int().min(0).max(20).default(4),
      timeoutMs: z.number().int().min(1).max(600_000).default(30_000),
    })
    .prefault({})
    .refine((embedding) => embedding.provider !== 'openai' || embedding.baseUrl !== undefined, {
      message: 'embedding.provider "openai" needs embedding.baseUrl (EMBEDDING_BASE_URL)',
      path: ['baseUrl'],
    })
    .refine((embedding) => embedding.provider !== 'openai' || embedding.model !== OFFLINE_MODEL_ID, {
      message: 'embedding.provider "openai" needs embedding.model (EMBEDDING_MODEL) set to the server\'s model name',
      path: ['model'],
    }),
  search: z
    .object({
      mode: z.enum(SEARCH_MODES).default(DEFAULT_SEARCH_SETTINGS.mode),
      topK: z.number().int().min(1).default(DEFAULT_SEARCH_SETTINGS.topK),
      maxTopK: z.number().int().min(1).max(1000).default(DEFAULT_SEARCH_SETTINGS.maxTopK),
      weights: weightsSchema.prefault({}),
      fusion: z.enum(['weighted', 'rrf']).default(DEFAULT_SEARCH_SETTINGS.fusion),
      candidates: z.number().int().min(1).max(10_000).default(DEFAULT_SEARCH_SETTINGS.candidates),
      maxQueryLength: z.number().int().min(1).max(100_000).default(2_000),
      pinned: z.array(z.string()).default([]),
      /** Results scoring below this are dropped (0: none); per request as min_score. */
      minScore: z.number().min(0).max(1000).default(0),
      /** Longest wait for a query's embedding before the search answers from BM25 alone (and says so). */
      embedTimeoutMs: z.number().int().min(1).max(60_000).default(2_000),
      /** Per-query vector weight from the vector margin (src/search/fusion.ts), scaling the base weights in weighted fusion. */
      adaptive: z
        .object({ enabled: z.boolean().default(true), vectorMargin: z.number().positive().max(1).default(0.3) })
        .prefault({}),
      /** Re-scores the top fused candidates (src/search/rerank.ts); off by default; per request `rerank: false`. */
      rerank: z
        .object({
          enabled: z.boolean().default(false),
          /** `remote`: POST url in the TEI/Cohere/Jina shape; `transformers`: a local cross-encoder under embedding.modelsDir. */
          provider: z.enum(['remote', 'transformers']).default('remote'),
          url: z.string().url().optional(),
          /** From RERANK_API_KEY. */
          apiKey: z.string().min(1).optional(),
          model: z.string().min(1).optional(),
          topN: z.number().int().min(2).max(200).default(20),
          timeoutMs: z.number().int().min(1).max(60_000).default(1_500),
        })
        .prefault({})
        .refine((rerank) => !rerank.enabled || rerank.provider !== 'remote' || rerank.url !== undefined, {
          message: 'search.rerank with provider "remote" needs url',
          path: ['url'],
        })
        .refine((rerank) => !rerank.enabled || rerank.provider !== 'transformers' || rerank.model !== undefined, {
          message: 'search.rerank with provider "transformers" needs model',
          path: ['model'],
        }),
      /**
       * When search pays off (src/search/activation.ts): a tool list with more tools than maxTools, or definitions
       * over maxTokens (o200k_base), is searched; a smaller one is shown whole. Used by mcp.search "auto" and by the
       * chat / responses rewriters (below both, a request is forwarded unchanged).
       */
      activation: z
        .object({
          maxTools: z.number().int().min(0).default(DEFAULT_ACTIVATION_THRESHOLDS.maxTools),
          maxTokens: z.number().int().min(0).default(DEFAULT_ACTIVATION_THRESHOLDS.maxTokens),
        })
        .prefault({}),
      lexical: z
        .object({
          fieldWeights: z
            .object({
              name: z.number().min(0),
              title: z.number().min(0),
              description: z.number().min(0),
              server: z.number().min(0),
              params: z.number().min(0),
            })
            .default(DEFAULT_LEXICAL.fieldWeights),
          bm25: z
            .object({ k: z.number().min(0).max(10), b: z.number().min(0).max(1), d: z.number().min(0).max(10) })
            .default(DEFAULT_LEXICAL.bm25),
          stem: z.boolean().default(DEFAULT_LEXICAL.stem),
          stopWords: z.boolean().default(DEFAULT_LEXICAL.stopWords),
        })
        .prefault({}),
      hnsw: z
        .object({
          m: z.number().int().min(2).max(128),
          efConstruction: z.number().int().min(8).max(2000),
          efSearch: z.number().int().min(1).max(10_000),
          exactThreshold: z.number().int().min(0),
        })
        .default(DEFAULT_HNSW),
    })
    .prefault({})
    .refine((search) => search.topK <= search.maxTopK, 'search.topK must not exceed search.maxTopK'),
  /** Learning from usage (src/feedback): tools called for similar past queries are boosted in hybrid search. */
  feedback: z
    .object({
      enabled: z.boolean().default(DEFAULT_FEEDBACK_SETTINGS.enabled),
      /** Fusion weight of the feedback signal next to search.weights; per request as weights.feedback. */
      weight: z.number().min(0).max(1000).default(DEFAULT_FEEDBACK_SETTINGS.weight),
      isolation: z.enum(['global', 'key']).default(DEFAULT_FEEDBACK_SETTINGS.isolation),
      halfLifeDays: z.number().positive().default(DEFAULT_FEEDBACK_SETTINGS.halfLifeDays),
      maxEvents: z.number().int().min(1).max(10_000_000).default(DEFAULT_FEEDBACK_SETTINGS.maxEvents),
      maxAgeDays: z.number().positive().default(DEFAULT_FEEDBACK_SETTINGS.maxAgeDays),
      neighbours: z.number().int().min(1).max(1_000).default(DEFAULT_FEEDBACK_SETTINGS.neighbours),
      minSimilarity: z.number().min(-1).max(1).default(DEFAULT_FEEDBACK_SETTINGS.minSimilarity),
      maxBoost: z.number().positive().default(DEFAULT_FEEDBACK_SETTINGS.maxBoost),
    })
    .prefault({}),
  upstreamLlmUrl: z.string().url().optional(),
  /** The OpenAI-compatible chat-completions proxy (forwards to upstreamLlmUrl). */
  chat: z
    .object({
      /**
       * Ranked tools a request keeps (rule-kept tools come on top); `x-toolrouter-k` overrides it per request. 10: the
       * model gets one shot, with no search_tools to ask again, so recall weighs more than for search's 5. Hybrid
       * Recall@10 is 71% on MetaTool (first 3,000 queries), 91% on the fixture, 99% on LiveMCPBench (69/86/99% at 8,
       * 76/94/99% at 15), for about 1.7k prompt tokens of definitions on LiveMCPBench.
       */
      k: z.number().int().min(1).max(1_000).default(10),
      /** Sent upstream as `Authorization: Bearer <key>` instead of the caller's Authorization (env UPSTREAM_LLM_KEY). */
      upstreamKey: z.string().min(1).optional(),
      /**
       * Longest wait for the upstream's response head (for a non-streaming request: the whole completion), then between
       * two streamed chunks. 600 s is the OpenAI SDKs' own default, so the proxy never gives up before its caller would.
       */
      timeoutMs: z.number().int().min(1).max(3_600_000).default(600_000),
      /** Request tool lists whose index is kept (least recently used first out). */
      toolIndexCacheSize: z.number().int().min(0).max(10_000).default(64),
      /**
       * Never forward more tools than this, whatever keeps them (128 is OpenAI's limit); the weakest reasons go first.
       */
      maxTools: z.number().int().min(1).max(10_000).default(128),
      /**
       * Name of the function tool trimmed requests carry so the model can ask for tools that were left out; the proxy
       * answers it. When the request has a tool of that name already, `<name>_2`, `<name>_3`... is used.
       */
      searchToolName: z.string().regex(/^[A-Za-z0-9_-]{1,60}$/, 'must be 1-60 characters of A-Z a-z 0-9 _ -').default('search_tools'),
      /** Search-tool calls the proxy answers per request before the model must answer with what it has; 0: no search tool. */
      searchRounds: z.number().int().min(0).max(10).default(3),
      /** Tools one search-tool call adds at most (the model may ask for fewer with top_k). */
      searchTopK: z.number().int().min(1).max(50).default(5),
      /** Conversations whose forwarded tools are remembered, so later turns keep them (least recently used first out). */
      stickyConversations: z.number().int().min(0).max(1_000_000).default(10_000),
      /** When ranking fails (index not ready, embeddings provider down), forward the tools unranked instead of failing. */
      failOpen: z.boolean().default(true),
      /** With ADMIN_KEY set, proxy requests need a toolrouter key (x-toolrouter-key); off, they go through without one. */
      requireKey: z.boolean().default(true),
    })
    .prefault({}),
  /** MCP gateway: upstream servers and the face served at /mcp and by `toolrouter stdio`. */
  mcp: z
    .object({
      /** Upstream MCP servers by name; the name prefixes their tools (`name` + catalog.separator + tool). */
      servers: z.record(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'server names are 1-64 characters of A-Z a-z 0-9 _ - .'), mcpServerSchema).default({}),
      /**
       * true: tools/list shows pinned tools + the two virtual tools; false: a plain aggregator listing everything;
       * "auto": the aggregator while the tools fit search.activation, search beyond it (clients get list_changed).
       */
      search: z.union([z.literal('auto'), z.boolean()], { error: 'must be "auto", true or false' }).default('auto'),
      searchToolName: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/).default('search_tools'),
      callToolName: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/).default('call_tool'),
      /** A forwarded call that takes longer fails with a timeout (and the upstream is told to cancel it). */
      callTimeoutMs: z.number().int().min(1).max(3_600_000).default(60_000),
      /**
       * A session's first tools/list and search_tools wait at most this long after start for every upstream's first
       * connection attempt (and the index of their tools); answers given before say which servers are missing.
       */
      startupWaitMs: z.number().int().min(0).max(600_000).default(10_000),
      /** Connecting and listing tools; an upstream slower than this counts as down. */
      connectTimeoutMs: z.number().int().min(1).max(600_000).default(30_000),
      /** Liveness ping for connected upstreams; an HTTP upstream that vanished is only noticed this way. 0: off. */
      pingIntervalMs: z.number().int().min(0).default(15_000),
      reconnect: z
        .object({ initialMs: z.number().int().min(1).default(500), maxMs: z.number().int().min(1).default(30_000) })
        .prefault({}),
      /** tools/list page size (with a query or in aggregator mode). */
      pageSize: z.number().int().min(1).max(10_000).default(100),
      /** Most tools a SEP-1821 query (`tools/list` with `params.query`) returns over all pages. */
      queryLimit: z.number().int().min(1).max(1_000).default(10),
      /** Idle /mcp sessions are closed after this long. */
      sessionIdleMs: z.number().int().min(1_000).default(30 * 60_000),
      maxSessions: z.number().int().min(1).default(1_000),
      /** Sessions one key (open service: one client address) may hold at once; beyond it initialize answers 429. */
      maxSessionsPerKey: z.number().int().min(1).default(100),
      /** A session that made no request after initialize is closed after this long (floods of bare sessions). */
      unusedSessionIdleMs: z.number().int().min(100).default(30_000),
      /** Tool transformation: qualified upstream tool name → new name, description, arguments... (src/mcp/transform.ts). */
      transforms: z.record(z.string().min(1), toolTransformSchema).default({}),
    })
    .prefault({})
    .refine((mcp) => mcp.searchToolName !== mcp.callToolName, 'mcp.searchToolName and mcp.callToolName must differ'),
}).superRefine((config, ctx) => {
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
  const merged = configInput(env, overrides);
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'config'}: ${issue.message}`);
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`, problems);
  }
  return parsed.data;
}

/** The configuration as given (file, environment, overrides merged), before validation and defaults. */
export function configInput(env: NodeJS.ProcessEnv = process.env, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const file = env.TOOLROUTER_CONFIG ? readConfigFile(env.TOOLROUTER_CONFIG) : {};
  const fromEnv = definedOnly({
    port: env.PORT ? parsePort('PORT', env.PORT) : undefined,
    host: env.HOST,
    redisUrl: env.REDIS_URL || undefined,
    adminKey: env.ADMIN_KEY || undefined,
    logLevel: env.LOG_LEVEL,
    upstreamLlmUrl: env.UPSTREAM_LLM_URL || undefined,
    chat: env.UPSTREAM_LLM_KEY ? { upstreamKey: env.UPSTREAM_LLM_KEY } : undefined,
    worker: env.WORKER_METRICS_PORT ? { metricsPort: parsePort('WORKER_METRICS_PORT', env.WORKER_METRICS_PORT) } : undefined,
  });
  const embeddingEnv = definedOnly({
    provider: env.EMBEDDING_PROVIDER || undefined,
    baseUrl: env.EMBEDDING_BASE_URL || undefined,
    apiKey: env.EMBEDDING_API_KEY || undefined,
    dimensions: env.EMBEDDING_DIMENSIONS || undefined,
    model: env.EMBEDDING_MODEL || undefined,
    allowRemoteModels: env.ALLOW_REMOTE_MODELS === undefined ? undefined : parseBoolean('ALLOW_REMOTE_MODELS', env.ALLOW_REMOTE_MODELS),
    modelsDir: env.MODELS_DIR || undefined,
  });
  const rerankEnv = env.RERANK_API_KEY ? { search: { rerank: { apiKey: env.RERANK_API_KEY } } } : {};
  return deepMerge(deepMerge(deepMerge(deepMerge(file, fromEnv), { embedding: embeddingEnv }), rerankEnv), overrides);
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
