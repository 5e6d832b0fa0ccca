import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Express, Router } from 'express';
import type { Logger } from 'pino';
import { creditingRecorder } from './analytics/credit.js';
import type { SearchLog } from './analytics/log.js';
import { startAnalytics } from './analytics/service.js';
import { Auth } from './auth/auth.js';
import { Identity } from './auth/identity/identity.js';
import { MemoryKeyStore, RedisKeyStore } from './auth/key-store.js';
import { RateLimits } from './auth/rate-limit.js';
import { Catalog } from './catalog/catalog.js';
import { staticSourceEntry } from './catalog/settings.js';
import { sendAnthropicError } from './chat/anthropic/errors.js';
import { sendOpenAiError } from './chat/openai/errors.js';
import { isProxyPath, passthroughRoutes } from './chat/passthrough.js';
import { CHAT_RAW_BODY_PATHS, chatRoutes, isAnthropicPath } from './chat/routes.js';
import type { Config } from './config/config.js';
import { createEmbedder, type Embedder } from './embedding/embedder.js';
import { providerCooldownOf } from './embedding/openai.js';
import { startFeedback, type FeedbackService } from './feedback/service.js';
import { createApp } from './http/app.js';
import { feedbackRoutes } from './http/routes/feedback.js';
import { startIndexing } from './indexing/indexing.js';
import type { IndexManager, IndexPipeline } from './indexing/manager.js';
import { createLogger } from './log.js';
import { Metrics } from './metrics.js';
import { mcpErrorShape } from './mcp/server/http.js';
import { createMcpFaces, type McpFaces } from './mcp/index.js';
import { RedisGate, RedisKeys } from './redis/connection.js';
import { RedisBus } from './redis/bus.js';
import { LocalInstances } from './state/instances.js';
import { RedisInstances } from './state/redis/instances.js';
import { RedisTaskMessageQueue } from './state/redis/task-messages.js';
import { RedisTaskStore } from './state/redis/tasks.js';
import { MemoryTaskStore } from './state/tasks.js';
import { LocalRoundSecrets } from './state/rounds.js';
import { RedisRoundSecrets } from './state/redis/rounds.js';
import { RedisSessionStore } from './state/redis/sessions.js';
import { redisForm } from './redis/settings.js';
import { MemoryConversationStore, type ConversationStore } from './state/conversations.js';
import { RedisConversationStore } from './state/redis/conversations.js';
import { RedisSearchStore } from './state/redis/searches.js';
import { startSearchDefaults } from './search/defaults.js';
import { SearchService } from './search/search.js';
import type { AuditSink } from './audit/types.js';
import { AuditLog } from './audit/log.js';
import { openAuditStore } from './audit/open.js';
import { auditRoutes } from './http/routes/audit.js';
import { SecretScanner } from './guardrails/secrets.js';
import { PolicyService } from './policy/service.js';
import { policyRoutes } from './mcp/server/policy-routes.js';
import { createReranker } from './search/rerank.js';
import { consoleDir, shippedModelsDir } from './package-root.js';

export interface Toolrouter {
  config: Config;
  catalog: Catalog;
  indexes: IndexManager;
  pipeline: IndexPipeline;
  search: SearchService;
  /** Learning from usage; undefined when feedback.enabled is false. */
  feedback: FeedbackService | undefined;
  /** The search log (GET /v1/analytics/*); undefined when analytics.enabled is false. */
  analytics: SearchLog | undefined;
  embedder: Embedder;
  app: Express;
  log: Logger;
  /** This router's Prometheus registry and metrics (GET /metrics). */
  metrics: Metrics;
  /** MCP gateway: upstream servers, the gateway, and its /mcp and /mcp-rest faces. */
  mcp: McpFaces;
  /** The audit trail (src/audit); undefined when audit.enabled is false. */
  audit: AuditLog | undefined;
  /** Governance policies (src/policy): the engine, reload, the schema. */
  policy: PolicyService;
  /** Stops background work and closes connections (upstreams, Redis), last opened first. */
  close(): Promise<void>;
  /** Starts the drain of a graceful stop: /ready answers 503 from now on; everything else is served as before. */
  drain(): void;
}

/** Wires catalog → index → search → interfaces for one process. */
export interface ToolrouterOptions {
  log?: Logger;
  /** Tests hand in one embedder for many routers; default: built from config.embedding. */
  embedder?: Embedder;
  /** The web console's files; default: the package's (src/package-root.ts). */
  consoleDir?: string;
  /** Where every governed call attempt is recorded instead of the trail audit settings call for (tests). */
  audit?: AuditSink;
  /** Reload policies on SIGHUP (default true; tests starting several routers in one process turn it off). */
  policySighup?: boolean;
}

export async function createToolrouter(config: Config, options: ToolrouterOptions = {}): Promise<Toolrouter> {
  const log = options.log ?? createLogger(config.logLevel);
  const closers: (() => Promise<void> | void)[] = [];
  let draining = false;
  // Per router, so two routers in one process (tests, an application embedding toolrouter) count apart.
  const metrics = new Metrics({ processMetrics: true });
  const embedder =
    options.embedder ??
    (await createEmbedder({ ...config.embedding, shippedModelsDir: shippedModelsDir() }));
  // An embeddings provider's outage: failed requests, cooldowns and the queries not sent during them.
  providerCooldownOf(embedder)?.observe((event) => {
    metrics.embeddingProviderEvents.inc({ event });
    if (event === 'cooldown' || event === 'recovered') metrics.embeddingProviderCoolingDown.set(event === 'cooldown' ? 1 : 0);
  });
  const { jsonDepth, schemaBytes, schemaArrayItems, schemaObjectKeys, schemaPatternLength } = config.limits;
  const schemaLimits = { depth: jsonDepth, bytes: schemaBytes, arrayItems: schemaArrayItems, objectKeys: schemaObjectKeys, patternLength: schemaPatternLength };
  const catalog = new Catalog({ separator: config.catalog.separator, limits: schemaLimits });
  for (const [source, entry] of Object.entries(config.catalog.sources)) {
    const { tools, description } = staticSourceEntry(entry);
    catalog.setSource(source, tools, undefined, description);
  }

  // Every Redis key, channel and queue name of this deployment, built once and handed to each module that uses Redis.
  const redisKeys = RedisKeys.of(config.queue.prefix, config.redis);
  const { search: searchConfig } = config;
  // One Redis bus for the process (command + subscriber connections), closed last; every shared store rides on it.
  const bus = redisForm(config.redis)
    ? new RedisBus({
        redis: config.redis,
        keys: redisKeys,
        log,
        connectionName: `toolrouter-api:${config.queue.prefix}:${randomUUID().slice(0, 8)}`,
        generationCheckMs: config.queue.generationCheckMs,
        healthGauge: metrics.redisUp,
      })
    : undefined;
  if (bus) closers.push(() => bus.close());
  const { indexes, pipeline, sources, redis, close: stopIndexing } = await startIndexing(
    { separator: config.catalog.separator, lexical: searchConfig.lexical, hnsw: searchConfig.hnsw, queue: config.queue, metrics },
    catalog,
    embedder,
    log,
    bus,
  ).catch(async (error: unknown) => {
    await bus?.close();
    throw error;
  });
  closers.push(stopIndexing);

  // Loaded before search starts, so the first search already counts every stored event.
  const feedback = await startFeedback({ settings: config.feedback, metrics, keepQueries: config.analytics.queries === 'full' }, embedder, log, bus);
  if (feedback) closers.push(() => feedback.close());
  const reranker = await createReranker(config.search.rerank, config.embedding);
  // Every search a face marks is logged (one log for all instances with Redis); recording never holds a search up.
  const analytics = startAnalytics({ settings: config.analytics, metrics, log, ...(bus ? { bus } : {}) });
  if (analytics) closers.push(() => analytics.close());
  const search = new SearchService({ catalog, indexes, embedder, settings: config.search, feedback, reranker, metrics, ...(analytics ? { observer: analytics } : {}) });
  // What the MCP and chat faces credit a call to (a search followed by a call of a tool it found) reaches the search
  // log as "the tool then called" as well as feedback: one pairing for both.
  const credits = analytics ? creditingRecorder(analytics, feedback) : feedback;
  // Fusion defaults changed at run time (the console's "apply"); shared through Redis when there is one.
  const defaults = await startSearchDefaults(search, { bus, log });
  closers.push(() => defaults.close());
  // Policies (src/policy): validated before anything serves (an invalid set refuses the start), shared through Redis.
  const policy = await PolicyService.start({ settings: config.policy, log: log.child({ component: 'policy' }), ...(bus ? { bus } : {}), sighup: options.policySighup ?? true });
  closers.push(() => policy.close());
  // Every holder listens now: the generation marker is claimed, and a Redis that lost its data gets their state back.
  await bus?.start();
  // From now on writes are refused at once while the slot (or master) toolrouter writes to is away, and /ready says so.
  bus?.health.start();

  // Keys and rate counters live beside the index in Redis, so every instance agrees on them; without Redis, keys are
  // kept in stateDir (when set) as runtime servers and OAuth grants are.
  const gate = bus ? new RedisGate(bus.redis, { timeoutMs: config.security.redisTimeoutMs, cooldownMs: config.security.redisCooldownMs }) : undefined;
  const auth = new Auth(
    { adminKey: config.adminKey, perIpPerMinute: config.security.perIpPerMinute, authFailuresPerIpPerMinute: config.security.authFailuresPerIpPerMinute },
    bus ? new RedisKeyStore(bus.redis, redisKeys, gate, bus.writes) : new MemoryKeyStore(config.stateDir),
    new RateLimits(gate ? { gate, keys: redisKeys } : undefined),
    config.auth.oauth
      ? new Identity(config.auth.oauth, config.keys.defaults, log.child({ component: 'identity' }), config.policy.files.length > 0 ? [config.policy.groupsClaim, ...config.policy.claims] : [])
      : undefined,
  );

  // The other faces (MCP gateway, chat proxy) add their routers here.
  const routers: Router[] = [];
  const chatConfig = { chat: config.chat, search: searchConfig, upstreamLlmUrl: config.upstreamLlmUrl, upstreamAnthropicUrl: config.upstreamAnthropicUrl, bodyLimit: config.bodyLimit, limits: config.limits };
  // Conversations (sticky selections, ranked turns) in Redis when there is one, so any instance continues any of them.
  const conversations: ConversationStore = gate
    ? new RedisConversationStore({ redis: gate.redis, keys: redisKeys, ttlMs: config.chat.conversationTtlMs, gate })
    : new MemoryConversationStore({ selections: config.chat.stickyConversations });
  routers.push(chatRoutes({ config: chatConfig, catalog, search, embedder, log, feedback: credits, metrics, conversations }));
  routers.push(feedbackRoutes({ catalog, feedback, maxQueryLength: config.search.maxQueryLength }));
  // Tasks and input-required rounds outlive the request that started them: with Redis their records are shared and
  // this instance (random id, heartbeat) is reachable by the others (src/state/).
  const instances = bus ? await RedisInstances.start(bus, { log }) : new LocalInstances();
  closers.push(() => instances.close());
  const roundSecrets = bus ? await RedisRoundSecrets.start(bus.redis, redisKeys, { log }) : new LocalRoundSecrets();
  closers.push(() => roundSecrets.close());
  // The audit trail (src/audit): a Redis stream shared by every instance, files under stateDir, or memory; records
  // name this instance by its registry id. Closed after the faces, so the calls they finish are recorded too.
  const trail = config.audit.enabled
    ? (() => {
        const { store, where } = openAuditStore({ settings: config.audit, ...(bus ? { redis: { client: bus.redis, keys: redisKeys } } : {}), ...(config.stateDir === undefined ? {} : { stateDir: config.stateDir }) });
        log.debug({ where }, 'audit trail');
        return new AuditLog({
          store,
          instance: instances.id,
          settings: config.audit,
          metrics: { written: (records, result) => metrics.auditWrites.inc({ result }, records), dropped: () => metrics.auditDropped.inc() },
          log: log.child({ component: 'audit' }),
        });
      })()
    : undefined;
  if (trail) closers.push(() => trail.close());
  const audit = options.audit ?? trail;
  const tasksState = { store: bus ? new RedisTaskStore(bus.redis, redisKeys) : new MemoryTaskStore(), instances, roundSecrets, log };
  // 2025-era /mcp sessions: in Redis when there is one, so any instance serves any session (src/state/sessions.ts).
  const sessionStore = bus ? new RedisSessionStore(bus, { idleMs: config.mcp.sessionIdleMs, unusedIdleMs: config.mcp.unusedSessionIdleMs }) : undefined;
  const mcp = createMcpFaces({ config: { mcp: config.mcp, catalog: config.catalog, search: searchConfig }, catalog, search, log, feedback: credits, indexes, metrics, bus, sessionStore, stateDir: config.stateDir, countRequest: (access) => auth.countRequest(access), tasksState, taskMessages: bus ? new RedisTaskMessageQueue(bus.redis, redisKeys, config.mcp.tasks.maxTtlMs) : undefined, auth, ...(gate ? { searches: new RedisSearchStore({ redis: gate.redis, keys: redisKeys, gate }) } : {}) });
  // Every tool call, resource read and prompt on every face goes through one governed path (src/mcp/gateway/governance.ts).
  // With an audit trail the scanner runs even with both actions off: records carry arguments with credentials redacted.
  const guard = config.guardrails.secrets.arguments === 'off' && config.guardrails.secrets.results === 'off' && !audit
    ? undefined
    : new SecretScanner({ ...config.guardrails.secrets, maxBytes: config.mcp.maxResultBytes });
  mcp.gateway.govern({
    // Always handed in: without files it decides nothing, but names callers (kind, id, groups) for the audit trail.
    policy: policy.engine,
    ...(guard ? { guard } : {}),
    ...(audit ? { audit } : {}),
    metrics: {
      decision: (decision) => metrics.policyDecisions.inc({ decision }),
      confirmation: (outcome) => metrics.confirmations.inc({ outcome }),
      guardrailHit: (rule, action) => metrics.guardrailHits.inc({ rule, action }),
    },
    log: log.child({ component: 'governance' }),
  });
  policy.onChange = () => mcp.gateway.policiesChanged();
  routers.push(policyRoutes({ gateway: mcp.gateway, keys: () => auth.store.list(), groupsClaim: config.policy.groupsClaim }));
  routers.push(auditRoutes({ audit: trail }));
  // /ready waits for every upstream's first connection attempt (src/http/routes/health.ts).
  let upstreamsSettled = false;
  void mcp.upstreams.settled().then(() => (upstreamsSettled = true));
  routers.push(...mcp.routers);
  closers.push(() => mcp.close());
  // Servers added at run time (stored in Redis, or the state file): connected like configured ones.
  await mcp.runtime.start();
  // Last: only /v1/* paths no other router serves reach the upstream LLM unchanged.
  routers.push(
    passthroughRoutes(
      {
        upstreamUrl: config.upstreamLlmUrl,
        upstreamKey: config.chat.upstreamKey,
        anthropicUrl: config.upstreamAnthropicUrl,
        anthropicKey: config.chat.anthropicUpstreamKey,
        timeoutMs: config.chat.timeoutMs,
        bodyLimit: config.bodyLimit,
      },
      log,
    ),
  );

  const app = createApp({
    catalog,
    sources,
    indexes,
    pipeline,
    search,
    log,
    bodyLimit: config.bodyLimit,
    maxQueryLength: config.search.maxQueryLength,
    policyView: (access) => mcp.gateway.policyView(access),
    jsonDepth: config.limits.jsonDepth,
    indexGraceMs: config.ready.indexGraceMs,
    draining: () => draining,
    upstreamsSettled: () => upstreamsSettled,
    routers,
    rawBodyPaths: CHAT_RAW_BODY_PATHS,
    proxy: { isProxyPath, requireKey: config.chat.requireKey },
    errorShapes: [{ matches: isAnthropicPath, send: sendAnthropicError }, { matches: isProxyPath, send: sendOpenAiError }, mcpErrorShape],
    tuning: { catalog, indexes, search, embedder, config: { catalog: config.catalog, search: searchConfig, feedback: config.feedback, embedding: config.embedding }, defaults, ...(analytics ? { traffic: analytics } : {}) },
    analytics,
    redis,
    ...(bus ? { redisHealth: bus.health } : {}),
    auth,
    security: config.security,
    // Without a key anyone who can reach the service is served, so who may reach it is checked: an open service, and
    // any service bound to loopback (where a web page rebinding a name is the one outside caller there can be).
    ...(!config.adminKey || isLoopback(config.host)
      ? { hostCheck: { host: config.host, allowedHosts: config.security.allowedHosts, allowedOrigins: config.security.allowedOrigins } }
      : {}),
    keyDefaults: config.keys.defaults,
    consoleDir: options.consoleDir ?? consoleDir(),
    metrics,
  });
  const close = async () => {
    for (const closer of [...closers].reverse()) await closer();
  };
  const drain = () => {
    draining = true;
  };
  return { config, catalog, indexes, pipeline, search, feedback, analytics, embedder, app, log, metrics, mcp, policy, audit: trail, close, drain };
}

/** An open service (no ADMIN_KEY) binds to loopback only; `serve` checks this before starting anything. */
export function checkListenAddress(config: Pick<Config, 'adminKey' | 'host'>): void {
  if (!config.adminKey && !isLoopback(config.host)) {
    throw new Error(`refusing to listen on ${config.host} without ADMIN_KEY: an open service binds to loopback only`);
  }
}

export async function listen(router: Toolrouter): Promise<Server> {
  const { config, log } = router;
  checkListenAddress(config);
  const server = await new Promise<Server>((resolve, reject) => {
    const started = router.app.listen(config.port, config.host, (error?: Error) => (error ? reject(error) : resolve(started)));
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  // The address to open, in the line a new user reads first (GET / leads to the console too). The message stays
  // 'toolrouter listening': scripts and tests wait for it.
  const url = `http://${browsableHost(config.host)}:${port}/`;
  log.info({ url, console: `${url}console/`, host: config.host, port, model: router.embedder.modelId, auth: config.adminKey ? 'admin key' : 'open (loopback only)' }, 'toolrouter listening');
  if (!config.adminKey) {
    log.warn(`no ADMIN_KEY: the service is open to every local caller, so it listens on ${config.host} (loopback) only; set ADMIN_KEY to require keys and to listen elsewhere`);
  }
  return server;
}

/** A host a browser can open: the wildcard addresses become localhost, IPv6 literals get brackets. */
function browsableHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return 'localhost';
  return host.includes(':') ? `[${host}]` : host;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}
