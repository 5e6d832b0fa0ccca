import express, { Router, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { Embedder } from '../embedding/embedder.js';
import type { Metrics } from '../metrics.js';
import { IndexNotReadyError, type SearchService } from '../search/search.js';
import { ToolrouterError } from '../errors.js';
import { anthropicDialect } from './anthropic/dialect.js';
import type { Dialect } from './core/dialect.js';
import { invalidRequest } from './core/errors.js';
import { openAiErrorHandler } from './openai/errors.js';
import { chatDialect } from './openai-chat/dialect.js';
import { responsesDialect } from './openai-responses/dialect.js';
import { forwardRequest, type UpstreamSettings } from './core/proxy.js';
import { ToolRewriter, type Rewrite, type RewriteOptions } from './core/rewriter.js';
import { forwardWithSearch } from './core/search-rounds.js';
import { searchToolDefinition, searchToolName } from './core/search-tool.js';
import { deferredBody, nativeMode, readNativeHeader } from './core/native.js';
import { StickySelections, type ConversationKeys } from './core/sticky.js';
import type { AnswerReader } from './core/answers.js';
import { ToolIndexCache } from './core/tool-index-cache.js';
import { parseJsonObject, type Api, type RequestTool, type ToolRequest } from './core/tool-request.js';
import { ChatFeedback } from './core/feedback-capture.js';
import { MemoryConversationStore, type ConversationStore } from '../state/conversations.js';
import type { FeedbackRecorder } from '../feedback/service.js';
import { accessOf } from '../http/auth.js';
import type { LimitsSettings } from '../catalog/settings.js';
import type { SearchConfig } from '../search/settings.js';
import type { ChatSettings } from './settings.js';
import { llmSpan } from '../telemetry/spans.js';
import { countToolTokens, TOKENS_HEADER, tokensHeader } from '../telemetry/token-accounting.js';

/** The APIs the chat face speaks, each behind its Dialect: everything that differs between them is there. */
export const DIALECTS: Readonly<Record<Api, Dialect>> = { chat: chatDialect, responses: responsesDialect, anthropic: anthropicDialect };

export const CHAT_COMPLETIONS_PATH = chatDialect.path;
export const RESPONSES_PATH = responsesDialect.path;
export const REWRITE_PATH = '/v1/tools/rewrite';
export const MESSAGES_PATH = anthropicDialect.path;
export const COUNT_TOKENS_PATH = anthropicDialect.countTokensPath!;
/** Routes that read their body raw (see createApp): forwarded byte for byte, and malformed JSON answered in the face's shape. */
export const CHAT_RAW_BODY_PATHS = [CHAT_COMPLETIONS_PATH, RESPONSES_PATH, REWRITE_PATH, MESSAGES_PATH, COUNT_TOKENS_PATH];

/** Anthropic's API paths on this face (`/v1/messages` and below): their errors are Anthropic-shaped. */
export const isAnthropicPath = (path: string): boolean => path === MESSAGES_PATH || path.startsWith(`${MESSAGES_PATH}/`);

/** Conversation turns whose ranked tools the memory store remembers for feedback (least recently seen first out). */
const CHAT_TURNS = 10_000;

/** Most tools a request may ask to keep through `x-toolrouter-k`. */
const MAX_K = 1_000;

/** The configuration slices the chat face reads, handed in by the assembly (src/server.ts). */
export interface ChatConfig {
  chat: ChatSettings;
  search: Pick<SearchConfig, 'activation' | 'maxQueryLength' | 'lexical' | 'hnsw'>;
  /** Unset: the proxy routes answer that no upstream LLM is configured. */
  upstreamLlmUrl?: string;
  /** Anthropic-compatible base URL for /v1/messages; unset, those routes answer that none is configured. */
  upstreamAnthropicUrl?: string;
  bodyLimit: string;
  limits: Pick<LimitsSettings, 'jsonDepth'>;
}

/** What the chat face is built from, handed in by the assembly (src/server.ts). */
export interface ChatOptions {
  config: ChatConfig;
  catalog: Catalog;
  search: SearchService;
  embedder: Embedder;
  log: Logger;
  /** Learning from usage: a call of a tool the router kept, seen in a later turn, is recorded. */
  feedback?: FeedbackRecorder;
  /** The router's metrics (tools kept and dropped, tokens saved, search-tool calls...); without it nothing is counted. */
  metrics?: Metrics;
  /**
   * Where conversations' sticky selections and ranked turns live (src/state/conversations.ts): Redis when the
   * deployment has one, so any instance continues any conversation.
   * @defaultValue this process's memory, chat.stickyConversations histories
   */
  conversations?: ConversationStore;
}

/**
 * The LLM-API face: each dialect's route (`POST /v1/chat/completions`, `POST /v1/responses`, `POST /v1/messages`)
 * forwards requests upstream with their tool list cut to what the conversation needs, and `POST /v1/tools/rewrite`
 * shows that decision without forwarding.
 */
export function chatRoutes({ config, catalog, search, embedder, log, feedback, metrics, conversations }: ChatOptions): Router {
  const router = Router();
  const memory = new MemoryConversationStore({ selections: config.chat.stickyConversations, turns: CHAT_TURNS });
  const store = conversations ?? memory;
  const chatFeedback = new ChatFeedback(feedback, store, log);
  const rewriter = new ToolRewriter({
    catalog,
    search,
    embedder,
    activation: config.search.activation,
    maxQueryLength: config.search.maxQueryLength,
    cache: new ToolIndexCache({
      size: config.chat.toolIndexCacheSize,
      embedder,
      lexical: config.search.lexical,
      hnsw: config.search.hnsw,
      metrics,
    }),
  });
  const rawBody = express.raw({ type: () => true, limit: config.bodyLimit });
  // stickyConversations 0 turns stickiness off, wherever the store is.
  const sticky = new StickySelections(config.chat.stickyConversations === 0 ? memory : store, log);
  // Left in this process on purpose (derived, rebuilt from the request at the same result on any instance): the
  // ToolIndexCache above (indexes of request tool lists, keyed by their hash) and the catalog-size memo in ToolRewriter's
  // ActivationPolicy (keyed by catalog hash). Nothing else in src/chat outlives a request.

  /** Where an API's requests go; unset, its routes answer that no upstream is configured. */
  const upstreamOf = ({ upstream }: Dialect): UpstreamSettings => {
    const anthropic = upstream.setting === 'anthropic';
    const url = anthropic ? config.upstreamAnthropicUrl : config.upstreamLlmUrl;
    if (!url) {
      const setting = anthropic ? 'UPSTREAM_ANTHROPIC_URL (or upstreamAnthropicUrl' : 'UPSTREAM_LLM_URL (or upstreamLlmUrl';
      throw new ToolrouterError(
        'upstream_not_configured',
        `No upstream ${anthropic ? 'Anthropic API' : 'LLM'} is configured: set ${setting} in the config file). POST /v1/tools/rewrite works without one.`,
      );
    }
    const key = anthropic ? config.chat.anthropicUpstreamKey : config.chat.upstreamKey;
    return { url, route: upstream.route, keyHeader: upstream.keyHeader, ...(key === undefined ? {} : { key }), timeoutMs: config.chat.timeoutMs };
  };

  /**
   * One proxied request, whichever API: its tools rewritten, forwarded (with the search round when it lost tools), and
   * the turn filed for sticky selection. One function, so whatever wraps a proxy round (spans, accounting) wraps it.
   */
  const proxy = (dialect: Dialect) => async (req: Request, res: Response) => {
    const { api } = dialect;
    const upstream = upstreamOf(dialect);
    const request = readRequest(req, dialect, config.limits.jsonDepth);
    const access = accessOf(res);
    const { rewrite, searchTool, keys, native } = await prepare(req, res, dialect, request);
    const { body, decision } = rewrite;
    // Runs beside the forwarding (it never fails); awaited at the end so its store writes finish with the request.
    const observed = chatFeedback.observe(dialect.conversationSteps(request), decision, access.scope);
    const labels = { mode: decision.mode };
    metrics?.chatToolsKept.inc(labels, decision.kept.length);
    metrics?.chatToolsDropped.inc(labels, decision.dropped.length);
    metrics?.chatTokensSaved.inc(labels, decision.tokens.saved);
    log.debug({ api, mode: decision.mode, kept: decision.kept.length, total: decision.total, cache: decision.cache, native }, 'tools rewritten');
    res.setHeader('x-toolrouter-tools', `${decision.kept.length}/${decision.total}`);
    res.setHeader(TOKENS_HEADER, tokensHeader(decision.tokens.after, decision.tokens.before));
    if (native) res.setHeader('x-toolrouter-native', 'on');
    const kept = decision.kept.map((tool) => tool.name);
    // What the caller is answered identifies the conversation's next turn (src/chat/core/sticky.ts).
    let answer: AnswerReader | undefined;
    const observe = (reply: globalThis.Response) => (answer = dialect.answers.reader(reply));
    // Filed once, as soon as the whole answer was read and before its end reaches the caller (proxy.ts settle), so an
    // instance killed the moment it answered has filed the turn its next one continues; again after is a no-op.
    let filing: Promise<void> | undefined;
    const file = (names: readonly string[], responseId?: string) => {
      const reply = answer as AnswerReader | undefined;
      return (filing ??= sticky.set(keys, names, reply?.finish(), reply?.responseId ?? responseId));
    };
    const settleTimeoutMs = config.chat.fileTurnTimeoutMs;
    if (body === undefined || searchTool === undefined) {
      countToolTokens(metrics, dialect.tokenFace, access, { offered: decision.tokens.before, forwarded: decision.tokens.after });
      // Unchanged requests go upstream as the very bytes the caller sent.
      const sent = body === undefined ? rawBytes(req, request) : JSON.stringify(body);
      const filed = body !== undefined && decision.mode === 'request';
      const settle = filed ? { settle: () => file(kept), settleTimeoutMs } : {};
      await llmSpan({ api, model: request.body.model, url: upstream.url }, () => forwardRequest(req, res, sent, upstream, log, { observe, ...settle }));
      if (filed) await file(kept);
      await observed;
      return;
    }
    const result = await forwardWithSearch({
      dialect,
      req,
      res,
      request,
      body: native ? deferredBody(request, body) : body,
      forwarded: kept,
      total: decision.total,
      offeredTokens: decision.tokens.before,
      access,
      upstream,
      rewriter,
      metrics,
      settings: {
        toolName: searchTool,
        rounds: config.chat.searchRounds,
        topK: config.chat.searchTopK,
        maxTools: config.chat.maxTools,
        maxQueryLength: config.search.maxQueryLength,
        native,
      },
      log,
      observe,
      settle: (forwarded, responseId) => file([...forwarded], responseId),
      settleTimeoutMs,
    });
    countToolTokens(metrics, dialect.tokenFace, access, { offered: decision.tokens.before, forwarded: result.tokens });
    await file(result.forwarded, result.responseId);
    await observed;
  };

  /**
   * The rewrite of one request: the tools it forwards (sticky ones first), and the search tool's name when it gets one.
   * Ranking that fails (an index not ready, the embeddings provider down) forwards the tools unranked with
   * chat.failOpen, and says so in `x-toolrouter-fail-open`. `native`: the tools not kept are to be deferred rather than
   * removed (Anthropic's defer_loading), decided per request.
   */
  const prepare = async (
    req: Request,
    res: Response,
    dialect: Dialect,
    request: ToolRequest,
  ): Promise<{ rewrite: Rewrite; searchTool?: string; keys: ConversationKeys; native: boolean }> => {
    const access = accessOf(res);
    const options = rewriteOptions(req, res, dialect, config.chat.k);
    const nativeHeader = readNativeHeader(req);
    const keys = sticky.keys(request, dialect.answers, access.scope);
    const n = request.body.n;
    // The search tool needs a turn it can read (one choice), a model allowed to call tools, and a key allowed to search.
    const toolChoice = request.body.tool_choice;
    const searchable =
      !options.useCatalog &&
      config.chat.searchRounds > 0 &&
      access.searchEnabled &&
      toolChoice !== 'none' &&
      (toolChoice as { type?: unknown } | undefined)?.type !== 'none' &&
      !(typeof n === 'number' && n > 1);
    let rewrite: Rewrite;
    try {
      rewrite = await rewriter.rewrite(request, {
        ...options,
        sticky: options.useCatalog ? [] : await sticky.get(keys),
        maxTools: config.chat.maxTools - (searchable ? 1 : 0),
        abstain: searchable,
      });
    } catch (error) {
      // The caller's own mistakes are answered, never failed open.
      if ((error instanceof ToolrouterError && error.code === 'invalid_request') || !config.chat.failOpen) throw error;
      log.warn({ err: error, api: request.api }, 'ranking the tools failed; forwarding them unranked (chat.failOpen)');
      metrics?.chatFailOpen.inc({ api: request.api });
      res.setHeader('x-toolrouter-fail-open', error instanceof IndexNotReadyError ? 'index_not_ready' : 'search_failed');
      return { rewrite: rewriter.unranked(request, { ...options, maxTools: config.chat.maxTools }), keys, native: false };
    }
    // Only a request that lost tools needs a way back to them.
    const trimmed = rewrite.body !== undefined && rewrite.decision.mode === 'request' && rewrite.decision.dropped.length > 0;
    const withSearch = searchable && trimmed;
    const native = withSearch && nativeMode(nativeHeader, dialect, request, config.chat);
    const name = (native ? dialect.native?.searchToolName : undefined) ?? searchToolName(request.tools, config.chat.searchToolName);
    return { rewrite, keys, native, ...(withSearch ? { searchTool: name } : {}) };
  };
  /** Token counting as the upstream would count the request sent: the same rewrite (and search tool), no search round. */
  const countTokens = (dialect: Dialect) => async (req: Request, res: Response) => {
    const upstream = upstreamOf(dialect);
    const request = readRequest(req, dialect, config.limits.jsonDepth);
    const { rewrite, searchTool, native } = await prepare(req, res, dialect, request);
    const { body, decision } = rewrite;
    res.setHeader('x-toolrouter-tools', `${decision.kept.length}/${decision.total}`);
    if (native) res.setHeader('x-toolrouter-native', 'on');
    const sent = body && searchTool ? withSearchTool(native ? deferredBody(request, body) : body, dialect, searchTool, request.tools) : body;
    await forwardRequest(req, res, sent === undefined ? rawBytes(req, request) : JSON.stringify(sent), upstream, log);
  };

  // Each API's routes, with errors in that API's shape from the dialect's own handler.
  for (const dialect of Object.values(DIALECTS)) {
    const routes = Router();
    routes.post(dialect.path, rawBody, proxy(dialect));
    if (dialect.countTokensPath) routes.post(dialect.countTokensPath, rawBody, countTokens(dialect));
    routes.use(dialect.errorHandler(log));
    router.use(routes);
  }

  router.post(REWRITE_PATH, rawBody, async (req, res) => {
    const parsed = Buffer.isBuffer(req.body) ? parseJsonObject(req.body, 'chat completion or Responses API request', config.limits.jsonDepth) : req.body;
    const dialect = DIALECTS[rewriteApi(parsed)];
    const request = dialect.parse(parsed);
    const { rewrite, searchTool, native } = await prepare(req, res, dialect, request);
    const { body, decision } = rewrite;
    res.setHeader('x-toolrouter-tools', `${decision.kept.length}/${decision.total}`);
    const forwarded = body && searchTool ? withSearchTool(native ? deferredBody(request, body) : body, dialect, searchTool, request.tools) : (body ?? request.body);
    res.json({ request: forwarded, decision: { ...decision, ...(searchTool ? { searchTool } : {}), ...(native ? { native } : {}) } });
  });

  router.use(openAiErrorHandler(log));
  return router;
}

/**
 * Which API a dry-run body is written for: a body with `messages` is a chat completion, unless it is Anthropic's (a
 * top-level `system`, or tools with an `input_schema`); one with `input`, `instructions` or `previous_response_id` (and
 * no `messages`) is a Responses API request. Anything else is read as a chat completion, whose validation then says
 * what is missing.
 */
export function rewriteApi(body: unknown): Api {
  if (typeof body !== 'object' || body === null) return 'chat';
  if ('messages' in body) {
    const { system, tools } = body as { system?: unknown; tools?: unknown };
    const anthropicTools = Array.isArray(tools) && tools.some((tool) => typeof tool === 'object' && tool !== null && 'input_schema' in tool);
    return system !== undefined || anthropicTools ? 'anthropic' : 'chat';
  }
  return ['input', 'instructions', 'previous_response_id'].some((field) => field in body) ? 'responses' : 'chat';
}

/** The body arrives raw (Buffer); if an app-level JSON parser got to it first, its parsed form is used instead. */
function readRequest(req: Request, dialect: Dialect, maxDepth: number): ToolRequest {
  return dialect.parse(Buffer.isBuffer(req.body) ? parseJsonObject(req.body, dialect.requestName, maxDepth) : req.body);
}

/** The body with the proxy's search tool at the end of its tools. */
function withSearchTool(body: Record<string, unknown>, dialect: Dialect, name: string, tools: readonly RequestTool[]): Record<string, unknown> {
  return { ...body, tools: [...((body.tools as unknown[] | undefined) ?? []), searchToolDefinition(dialect, name, tools)] };
}

function rawBytes(req: Request, request: ToolRequest): Uint8Array | string {
  return Buffer.isBuffer(req.body) ? new Uint8Array(req.body.buffer, req.body.byteOffset, req.body.byteLength) : JSON.stringify(request.body);
}

/** `x-toolrouter-k: <n>` overrides k; `x-toolrouter-catalog: true` ranks the router's catalog instead of the request's tools. */
function rewriteOptions(req: Request, res: Response, dialect: Dialect, defaultK: number): RewriteOptions {
  const kHeader = req.get('x-toolrouter-k');
  let k = defaultK;
  if (kHeader !== undefined) {
    k = Number(kHeader.trim());
    if (!/^\d+$/.test(kHeader.trim()) || k < 1 || k > MAX_K) {
      throw invalidRequest(`Header x-toolrouter-k must be an integer from 1 to ${MAX_K}, got "${kHeader}".`, 'x-toolrouter-k', 'invalid_header');
    }
  }
  const catalogHeader = req.get('x-toolrouter-catalog')?.trim().toLowerCase();
  if (catalogHeader !== undefined && !['true', 'false', '1', '0', ''].includes(catalogHeader)) {
    throw invalidRequest(`Header x-toolrouter-catalog must be true or false, got "${catalogHeader}".`, 'x-toolrouter-catalog', 'invalid_header');
  }
  return { k, useCatalog: catalogHeader === 'true' || catalogHeader === '1', access: accessOf(res), renderTool: (tool) => dialect.renderTool(tool) };
}
