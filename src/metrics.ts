import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The process's Prometheus registry; every face registers its metrics here. */
export const metrics = new Registry();

// Chat-completions proxy. Counted for requests actually forwarded upstream, not for dry runs on /v1/tools/rewrite.

export const chatToolsKept = new Counter({
  name: 'toolrouter_chat_tools_kept_total',
  help: 'Tools forwarded to the upstream LLM by the chat-completions proxy',
  labelNames: ['mode'] as const,
  registers: [metrics],
});

export const chatToolsDropped = new Counter({
  name: 'toolrouter_chat_tools_dropped_total',
  help: 'Tools of chat-completion requests not forwarded to the upstream LLM',
  labelNames: ['mode'] as const,
  registers: [metrics],
});

export const chatTokensSaved = new Counter({
  name: 'toolrouter_chat_tokens_saved_total',
  help: 'Prompt tokens of tool definitions not sent upstream (o200k_base over each definition as JSON)',
  labelNames: ['mode'] as const,
  registers: [metrics],
});

export const chatToolIndexLookups = new Counter({
  name: 'toolrouter_chat_tool_index_lookups_total',
  help: 'Lookups of the per-tool-list index cache of the chat proxy; a miss embeds and indexes the list',
  labelNames: ['result'] as const,
  registers: [metrics],
});

// Search, index and HTTP. Search is timed in SearchService, so every face (REST, MCP, chat catalog mode) is counted.

export const searchDuration = new Histogram({
  name: 'toolrouter_search_duration_seconds',
  help: 'Time to answer one search, by mode (select and regex included)',
  labelNames: ['mode'] as const,
  buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  registers: [metrics],
});

export const searchResults = new Histogram({
  name: 'toolrouter_search_results',
  help: 'Tools returned by one search',
  labelNames: ['mode'] as const,
  buckets: [0, 1, 3, 5, 10, 20, 50],
  registers: [metrics],
});

export const indexBuildDuration = new Histogram({
  name: 'toolrouter_index_build_duration_seconds',
  help: 'Index builds run in this process (the in-process pipeline; workers build the shared one)',
  buckets: [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  registers: [metrics],
});

export const indexTexts = new Counter({
  name: 'toolrouter_index_embedded_texts_total',
  help: 'Texts embedded by index builds in this process, by whether the embedding cache had them',
  labelNames: ['cache'] as const,
  registers: [metrics],
});

export const indexTools = new Gauge({
  name: 'toolrouter_index_tools',
  help: 'Tools in the live index',
  registers: [metrics],
});

export const indexSwaps = new Counter({
  name: 'toolrouter_index_swaps_total',
  help: 'Times the live index was replaced',
  registers: [metrics],
});

export const httpRequests = new Counter({
  name: 'toolrouter_http_requests_total',
  help: 'HTTP requests answered, by method, matched route and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [metrics],
});

collectDefaultMetrics({ register: metrics, prefix: 'toolrouter_' });
