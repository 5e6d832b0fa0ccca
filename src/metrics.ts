import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { BoundedLabels, MAX_KEY_LABELS } from './telemetry/token-accounting.js';

/**
 * One router's Prometheus registry and the metrics recorded into it. The assembly (src/server.ts, the worker process)
 * creates one and hands it to the modules that record; GET /metrics serves that registry. Two routers in one process
 * (tests, an embedding application) count apart.
 */
export class Metrics {
  readonly registry = new Registry();

  // Chat-completions proxy. Counted for requests actually forwarded upstream, not for dry runs on /v1/tools/rewrite.

  /**
   * 1 when the last keyed read/write on toolrouter's Redis slot (cluster) or master (Sentinel) succeeded, 0 when it
   * failed (src/redis/health.ts; run every redis.healthCheckMs). Absent without Redis.
   */
  readonly redisUp = new Gauge({
    name: 'toolrouter_redis_up',
    help: 'Whether the last keyed write and read on the Redis node holding toolrouter\'s keys succeeded (1) or not (0)',
    registers: [this.registry],
  });

  readonly chatToolsKept = new Counter({
    name: 'toolrouter_chat_tools_kept_total',
    help: 'Tools forwarded to the upstream LLM by the chat-completions proxy',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });

  readonly chatToolsDropped = new Counter({
    name: 'toolrouter_chat_tools_dropped_total',
    help: 'Tools of chat-completion requests not forwarded to the upstream LLM',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });

  readonly chatTokensSaved = new Counter({
    name: 'toolrouter_chat_tokens_saved_total',
    help: 'Prompt tokens of tool definitions not sent upstream (o200k_base over each definition as JSON)',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });

  readonly chatToolIndexLookups = new Counter({
    name: 'toolrouter_chat_tool_index_lookups_total',
    help: 'Lookups of the per-tool-list index cache of the chat proxy; a miss embeds and indexes the list',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly chatSearchCalls = new Counter({
    name: 'toolrouter_chat_search_calls_total',
    help: "Calls of the chat proxy's search tool answered by the proxy, by api and result (found, empty, invalid, error)",
    labelNames: ['api', 'result'] as const,
    registers: [this.registry],
  });

  readonly chatFailOpen = new Counter({
    name: 'toolrouter_chat_fail_open_total',
    help: 'Proxy requests forwarded with their tools unranked because ranking failed (chat.failOpen)',
    labelNames: ['api'] as const,
    registers: [this.registry],
  });

  // Tool-definition tokens by face and caller (src/telemetry/token-accounting.ts): offered vs forwarded on the proxies,
  // listed (every tool the caller may call) vs served (tools/list and search_tools answers) on MCP.

  readonly toolTokensOffered = new Counter({
    name: 'toolrouter_tool_tokens_offered_total',
    help: 'Prompt tokens of tool definitions offered: a proxied request\'s tools, or every tool an MCP caller may call at each tools/list',
    labelNames: ['face', 'key'] as const,
    registers: [this.registry],
  });

  readonly toolTokensForwarded = new Counter({
    name: 'toolrouter_tool_tokens_forwarded_total',
    help: 'Prompt tokens of tool definitions that reached the model: forwarded upstream by the proxy, or served by MCP tools/list and search_tools',
    labelNames: ['face', 'key'] as const,
    registers: [this.registry],
  });

  /** The `key` label's values: a key id (`key:<id>`) or the caller's kind, at most MAX_KEY_LABELS, then `other`. */
  readonly tokenKeyLabels = new BoundedLabels(MAX_KEY_LABELS);

  // Search, index and HTTP. Search is timed in SearchService, so every face (REST, MCP, chat catalog mode) is counted.

  readonly searchDuration = new Histogram({
    name: 'toolrouter_search_duration_seconds',
    help: 'Time to answer one search, by mode (select and regex included)',
    labelNames: ['mode'] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });

  readonly searchResults = new Histogram({
    name: 'toolrouter_search_results',
    help: 'Tools returned by one search',
    labelNames: ['mode'] as const,
    buckets: [0, 1, 3, 5, 10, 20, 50],
    registers: [this.registry],
  });

  // Governance (src/policy, src/guardrails): every governed call's decision, confirmations asked, credentials found.
  readonly policyDecisions = new Counter({
    name: 'toolrouter_policy_decisions_total',
    help: 'Governed calls by decision (permit, deny, confirmed, declined, blocked)',
    labelNames: ['decision'] as const,
    registers: [this.registry],
  });

  readonly confirmations = new Counter({
    name: 'toolrouter_confirmations_total',
    help: '@confirm policies by outcome (accepted, declined, unavailable, allowed_without)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly auditWrites = new Counter({
    name: 'toolrouter_audit_writes_total',
    help: 'Audit records appended to the audit store (result ok) or not yet (error: retried)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly auditDropped = new Counter({
    name: 'toolrouter_audit_dropped_total',
    help: 'Audit records dropped because the write queue (audit.queueSize) was full',
    registers: [this.registry],
  });

  readonly guardrailHits = new Counter({
    name: 'toolrouter_guardrail_hits_total',
    help: 'Credentials found in tool arguments or results, by secretlint rule and the action taken',
    labelNames: ['rule', 'action'] as const,
    registers: [this.registry],
  });

  readonly searchFallbacks = new Counter({
    name: 'toolrouter_search_fallbacks_total',
    help: 'Ranked searches answered from BM25 alone because the query embedding failed or timed out',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  // The openai embeddings provider's cooldown (src/embedding/openai.ts): failures in a row stop queries asking it.

  readonly mcpStreams = new Gauge({
    name: 'toolrouter_mcp_streams',
    help: 'Long-lived streams open on /mcp, by kind (listen: 2026-07-28 subscriptions/listen; sse: 2025 GET event streams)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly mcpStreamsRefused = new Counter({
    name: 'toolrouter_mcp_streams_refused_total',
    help: 'Streams refused (429) on /mcp, by kind and the cap reached (key: mcp.maxStreamsPerKey, total: mcp.maxStreams)',
    labelNames: ['kind', 'limit'] as const,
    registers: [this.registry],
  });

  readonly embeddingProviderEvents = new Counter({
    name: 'toolrouter_embedding_provider_events_total',
    help: 'Embeddings provider: failed requests (failure), cooldowns started (cooldown), queries not sent during one (skipped), recoveries (recovered)',
    labelNames: ['event'] as const,
    registers: [this.registry],
  });

  readonly embeddingProviderCoolingDown = new Gauge({
    name: 'toolrouter_embedding_provider_cooling_down',
    help: '1 from a cooldown of the embeddings provider until it answers again (meanwhile searches answer from BM25 at once)',
    registers: [this.registry],
  });

  /** Code mode: executions of model-written code (the execute tool), by how they ended (ok or the error code). */
  readonly codeExecutions = new Counter({
    name: 'toolrouter_code_executions_total',
    help: 'Executions of code by the execute tool, by outcome (ok, sandbox_timeout, sandbox_memory, sandbox_calls, sandbox_output, sandbox_error, busy, internal)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly codeExecutionDuration = new Histogram({
    name: 'toolrouter_code_execution_duration_seconds',
    help: 'Wall time of one execution of the execute tool, tool calls from the code included',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly codeExecutionCalls = new Histogram({
    name: 'toolrouter_code_execution_calls',
    help: 'Tool calls and searches one execution of the execute tool made',
    buckets: [0, 1, 2, 3, 5, 10, 20, 50],
    registers: [this.registry],
  });

  readonly searchReranks = new Counter({
    name: 'toolrouter_search_reranks_total',
    help: 'Reranker calls by outcome; on error or timeout the fused order is kept',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly indexBuildDuration = new Histogram({
    name: 'toolrouter_index_build_duration_seconds',
    help: 'Index builds run in this process (the in-process pipeline; workers build the shared one)',
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });

  readonly indexTexts = new Counter({
    name: 'toolrouter_index_embedded_texts_total',
    help: 'Texts embedded by index builds in this process, by whether the embedding cache had them',
    labelNames: ['cache'] as const,
    registers: [this.registry],
  });

  readonly indexTools = new Gauge({
    name: 'toolrouter_index_tools',
    help: 'Tools in the live index',
    registers: [this.registry],
  });

  readonly indexSwaps = new Counter({
    name: 'toolrouter_index_swaps_total',
    help: 'Times the live index was replaced',
    registers: [this.registry],
  });

  readonly httpRequests = new Counter({
    name: 'toolrouter_http_requests_total',
    help: 'HTTP requests answered, by method, matched route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });

  // Index worker process (`toolrouter worker`, scraped on worker.metricsPort); the build metrics above count its builds too.

  readonly indexBuilds = new Counter({
    name: 'toolrouter_index_builds_total',
    help: 'Index build jobs run by this worker, by outcome (built, reused, superseded, failed)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly indexArtifactBytes = new Gauge({
    name: 'toolrouter_index_artifact_bytes',
    help: 'Size of the last index artifact this worker built (serialized BM25 + vectors + HNSW graph)',
    registers: [this.registry],
  });

  // Upstream MCP servers, from the UpstreamManager's status events.

  readonly upstreamConnected = new Gauge({
    name: 'toolrouter_upstream_connected',
    help: 'Upstream MCP server connected (1) or not (0: connecting, down or closed)',
    labelNames: ['server', 'transport'] as const,
    registers: [this.registry],
  });

  readonly upstreamTools = new Gauge({
    name: 'toolrouter_upstream_tools',
    help: 'Tools an upstream MCP server contributes to the catalog',
    labelNames: ['server'] as const,
    registers: [this.registry],
  });

  readonly upstreamFailures = new Gauge({
    name: 'toolrouter_upstream_failures',
    help: 'Consecutive failed connection attempts of an upstream MCP server (0 while connected)',
    labelNames: ['server'] as const,
    registers: [this.registry],
  });

  // Feedback (src/feedback): events recorded by this process, and events every search here consults.

  readonly feedbackEventsRecorded = new Counter({
    name: 'toolrouter_feedback_events_total',
    help: 'Feedback events recorded by this process, by surface (rest, mcp, chat, replay) and relevant (true, false)',
    labelNames: ['surface', 'relevant'] as const,
    registers: [this.registry],
  });

  readonly feedbackEventsHeld = new Gauge({
    name: 'toolrouter_feedback_events',
    help: 'Feedback events held in memory for search (all instances\' events within the retention limits)',
    registers: [this.registry],
  });

  // Search analytics (src/analytics): what came of each search, once it is known.

  readonly searchOutcomes = new Counter({
    name: 'toolrouter_search_outcomes_total',
    help: 'Searches by surface and outcome: answered (a found tool was then called), unanswered (none within the window), abstained (nothing found)',
    labelNames: ['surface', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly searchLogDropped = new Counter({
    name: 'toolrouter_search_log_dropped_total',
    help: 'Search log writes dropped because the write queue was full or the store failed',
    registers: [this.registry],
  });

  /** `processMetrics`: also Node's own (memory, event loop, GC...), as a server or worker exports them. */
  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'toolrouter_' });
  }
}
