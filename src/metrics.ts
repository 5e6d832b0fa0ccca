import { Counter, Registry } from 'prom-client';

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
