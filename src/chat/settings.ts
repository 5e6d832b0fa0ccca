/** The chat / Responses proxy's settings (YAML `chat`): schema and defaults. Assembled by `src/config/`. */
import { z } from 'zod';

/** The OpenAI-compatible chat-completions proxy (forwards to upstreamLlmUrl). */
export const chatSettingsSchema = z
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
    /**
     * Conversations whose forwarded tools are remembered, so later turns keep them (least recently used first out). With
     * Redis they are shared by every instance and bounded by conversationTtlMs instead; 0 turns stickiness off either way.
     */
    stickyConversations: z.number().int().min(0).max(1_000_000).default(10_000),
    /**
     * With Redis: how long a conversation's stored turns (forwarded tools, ranked tools for feedback) live after their
     * last use. A conversation picked up again later is ranked afresh. 24 h: a chat left overnight keeps its tools.
     */
    conversationTtlMs: z.number().int().min(1_000).max(30 * 86_400_000).default(86_400_000),
    /**
     * How long a proxied turn's answer waits for the turn to be filed (its forwarded tools stored, for the next turn on any
     * instance) before its last bytes go to the caller: the whole body when not streamed, the terminal event (`[DONE]`,
     * `message_stop`, `response.completed`) when streamed. A store slower than this does not hold the reply; the turn is
     * still filed, after it.
     */
    fileTurnTimeoutMs: z.number().int().min(0).max(10_000).default(250),
    /** When ranking fails (index not ready, embeddings provider down), forward the tools unranked instead of failing. */
    failOpen: z.boolean().default(true),
    /** With ADMIN_KEY set, proxy requests need a toolrouter key (x-toolrouter-key); off, they go through without one. */
    requireKey: z.boolean().default(true),
    /** Sent to the Anthropic upstream as `x-api-key` instead of the caller's key (env UPSTREAM_ANTHROPIC_KEY). */
    anthropicUpstreamKey: z.string().min(1).optional(),
    /**
     * Provider-native tool search on `/v1/messages` and `/v1/responses` (per request: `x-toolrouter-native:
     * on|off|auto`). `off`: tools the routing does not keep are removed (trim). `auto`: for models in `nativeModels`,
     * every tool is forwarded and those not kept carry `defer_loading: true`; the proxy's search tool (Anthropic: a
     * custom tool answered with `tool_reference` blocks; OpenAI: a client-executed `tool_search` answered with a
     * `tool_search_output`) loads what the model asks for. Other models are trimmed.
     */
    native: z.enum(['off', 'auto']).default('off'),
    /**
     * Model name prefixes that support deferred tool loading: Anthropic documents tool search for Claude Sonnet and
     * Opus from 4.5 on (and the models after them), not for Haiku models; OpenAI for gpt-5.4 and later.
     */
    nativeModels: z
      .array(z.string().min(1))
      .max(1_000)
      .default(['claude-sonnet-4-5', 'claude-sonnet-4-6', 'claude-opus-4-5', 'claude-opus-4-6', 'claude-opus-4-7', 'claude-opus-4-8', 'claude-sonnet-5', 'claude-opus-5', 'claude-mythos', 'gpt-5.4', 'gpt-5.5', 'gpt-6']),
  })
  .prefault({});

export type ChatSettings = z.infer<typeof chatSettingsSchema>;
