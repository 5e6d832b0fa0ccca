import express, { Router, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { Embedder } from '../embedding/embedder.js';
import type { Metrics } from '../metrics.js';
import { IndexNotReadyError, type SearchService } from '../search/search.js';
import { OpenAiError, invalidRequest, openAiErrorHandler } from './errors.js';
import { forwardRequest } from './proxy.js';
import { parseChatRequest } from './request.js';
import { parseResponsesRequest } from './responses.js';
import { ToolRewriter, type Rewrite, type RewriteOptions } from './rewriter.js';
import { forwardWithSearch } from './search-rounds.js';
import { searchToolDefinition, searchToolName } from './search-tool.js';
import { StickySelections, type ConversationKeys } from './sticky.js';
import { ToolIndexCache } from './tool-index-cache.js';
import { parseJsonObject, type Api, type ToolRequest } from './tool-request.js';
import { ChatFeedback, conversationSteps } from './feedback-capture.js';
import type { FeedbackRecorder } from '../feedback/service.js';
import { accessOf } from '../http/auth.js';
import type { LimitsSettings } from '../catalog/settings.js';
import type { SearchConfig } from '../search/settings.js';
import type { ChatSettings } from './settings.js';

export const CHAT_COMPLETIONS_PATH = '/v1/chat/completions';
export const RESPONSES_PATH = '/v1/responses';
export const REWRITE_PATH = '/v1/tools/rewrite';
/** Routes that read their body raw (see createApp): forwarded byte for byte, and malformed JSON answered OpenAI-style. */
export const CHAT_RAW_BODY_PATHS = [CHAT_COMPLETIONS_PATH, RESPONSES_PATH, REWRITE_PATH];

/** Most tools a request may ask to keep through `x-toolrouter-k`. */
const MAX_K = 1_000;

const PARSERS: Record<Api, (body: unknown) => ToolRequest> = { chat: parseChatRequest, responses: parseResponsesRequest };
const WHAT: Record<Api, string> = { chat: 'chat completion request', responses: 'Responses API request' };

/** The configuration slices the chat face reads, handed in by the assembly (src/server.ts). */
export interface ChatConfig {
  chat: ChatSettings;
  search: Pick<SearchConfig, 'activation' | 'maxQueryLength' | 'lexical' | 'hnsw'>;
  /** Unset: the proxy routes answer that no upstream LLM is configured. */
  upstreamLlmUrl?: string;
  bodyLimit: string;
  limits: Pick<LimitsSettings, 'jsonDepth'>;
}

export interface ChatDependencies {
  config: ChatConfig;
  catalog: Catalog;
  search: SearchService;
  embedder: Embedder;
  log: Logger;
  /** Learning from usage: a call of a tool the router kept, seen in a later turn, is recorded. */
  feedback?: FeedbackRecorder;
  /** The router's metrics (tools kept and dropped, tokens saved, search-tool calls...); without it nothing is counted. */
  metrics?: Metrics;
}

/**
 * The OpenAI-compatible face: `POST /v1/chat/completions` and `POST /v1/responses` forward requests upstream with their
 * tool list cut to what the conversation needs, and `POST /v1/tools/rewrite` shows that decision without forwarding.
 */
export function chatRoutes({ config, catalog, search, embedder, log, feedback, metrics }: ChatDependencies): Router {
  const router = Router();
  const chatFeedback = new ChatFeedback(feedback, log);
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
  const sticky = new StickySelections(config.chat.stickyConversations);

  const proxy = (api: Api) => async (req: Request, res: Response) => {
    const upstreamUrl = config.upstreamLlmUrl;
    if (!upstreamUrl) {
      throw new OpenAiError(
        503,
        'No upstream LLM is configured: set UPSTREAM_LLM_URL (or upstreamLlmUrl in the config file). POST /v1/tools/rewrite works without one.',
        'api_error',
        null,
        'upstream_not_configured',
      );
    }
    const request = readRequest(req, api, config.limits.jsonDepth);
    const access = accessOf(res);
    const { rewrite, searchTool, keys } = await prepare(req, res, request);
    const { body, decision } = rewrite;
    chatFeedback.observe(conversationSteps(request), decision, access.scope);
    const labels = { mode: decision.mode };
    metrics?.chatToolsKept.inc(labels, decision.kept.length);
    metrics?.chatToolsDropped.inc(labels, decision.dropped.length);
    metrics?.chatTokensSaved.inc(labels, decision.tokens.saved);
    log.debug({ api, mode: decision.mode, kept: decision.kept.length, total: decision.total, cache: decision.cache }, 'tools rewritten');
    res.setHeader('x-toolrouter-tools', `${decision.kept.length}/${decision.total}`);
    const upstream = { url: upstreamUrl, api, key: config.chat.upstreamKey, timeoutMs: config.chat.timeoutMs };
    const kept = decision.kept.map((tool) => tool.name);
    if (body === undefined || searchTool === undefined) {
      // Unchanged requests go upstream as the very bytes the caller sent.
      await forwardRequest(req, res, body === undefined ? rawBytes(req, request) : JSON.stringify(body), upstream, log);
      if (body !== undefined && decision.mode === 'request') sticky.set(keys, kept);
      return;
    }
    const result = await forwardWithSearch({
      req,
      res,
      request,
      body,
      forwarded: kept,
      total: decision.total,
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
      },
      log,
    });
    sticky.set(keys, result.forwarded, result.responseId);
  };

  /**
   * The rewrite of one request: the tools it forwards (sticky ones first), and the search tool's name when it gets one.
   * Ranking that fails (an index not ready, the embeddings provider down) forwards the tools unranked with
   * chat.failOpen, and says so in `x-toolrouter-fail-open`.
   */
  const prepare = async (req: Request, res: Response, request: ToolRequest): Promise<{ rewrite: Rewrite; searchTool?: string; keys: ConversationKeys }> => {
    const access = accessOf(res);
    const options = rewriteOptions(req, res, config.chat.k);
    const keys = sticky.keys(request, access.scope);
    const n = request.body.n;
    // The search tool needs a turn it can read (one choice), a model allowed to call tools, and a key allowed to search.
    const searchable =
      !options.useCatalog && config.chat.searchRounds > 0 && access.searchEnabled && request.body.tool_choice !== 'none' && !(typeof n === 'number' && n > 1);
    let rewrite: Rewrite;
    try {
      rewrite = await rewriter.rewrite(request, {
        ...options,
        sticky: options.useCatalog ? [] : sticky.get(keys),
        maxTools: config.chat.maxTools - (searchable ? 1 : 0),
      });
    } catch (error) {
      if (error instanceof OpenAiError || !config.chat.failOpen) throw error;
      log.warn({ err: error, api: request.api }, 'ranking the tools failed; forwarding them unranked (chat.failOpen)');
      metrics?.chatFailOpen.inc({ api: request.api });
      res.setHeader('x-toolrouter-fail-open', error instanceof IndexNotReadyError ? 'index_not_ready' : 'search_failed');
      return { rewrite: rewriter.unranked(request, { ...options, maxTools: config.chat.maxTools }), keys };
    }
    // Only a request that lost tools needs a way back to them.
    const trimmed = rewrite.body !== undefined && rewrite.decision.mode === 'request' && rewrite.decision.dropped.length > 0;
    return { rewrite, keys, ...(searchable && trimmed ? { searchTool: searchToolName(request.tools, config.chat.searchToolName) } : {}) };
  };
  router.post(CHAT_COMPLETIONS_PATH, rawBody, proxy('chat'));
  router.post(RESPONSES_PATH, rawBody, proxy('responses'));

  router.post(REWRITE_PATH, rawBody, async (req, res) => {
    const parsed = Buffer.isBuffer(req.body) ? parseJsonObject(req.body, 'chat completion or Responses API request', config.limits.jsonDepth) : req.body;
    const request = PARSERS[rewriteApi(parsed)](parsed);
    const { rewrite, searchTool } = await prepare(req, res, request);
    const { body, decision } = rewrite;
    res.setHeader('x-toolrouter-tools', `${decision.kept.length}/${decision.total}`);
    const forwarded = body && searchTool ? { ...body, tools: [...(body.tools as unknown[]), searchToolDefinition(request.api, searchTool, request.tools)] } : (body ?? request.body);
    res.json({ request: forwarded, decision: searchTool ? { ...decision, searchTool } : decision });
  });

  router.use(openAiErrorHandler(log));
  return router;
}

/**
 * Which API a dry-run body is written for: a body with `messages` is a chat completion; one with `input`,
 * `instructions` or `previous_response_id` (and no `messages`) is a Responses API request. Anything else is read as a
 * chat completion, whose validation then says what is missing.
 */
export function rewriteApi(body: unknown): Api {
  if (typeof body !== 'object' || body === null || 'messages' in body) return 'chat';
  return ['input', 'instructions', 'previous_response_id'].some((field) => field in body) ? 'responses' : 'chat';
}

/** The body arrives raw (Buffer); if an app-level JSON parser got to it first, its parsed form is used instead. */
function readRequest(req: Request, api: Api, maxDepth: number): ToolRequest {
  return PARSERS[api](Buffer.isBuffer(req.body) ? parseJsonObject(req.body, WHAT[api], maxDepth) : req.body);
}

function rawBytes(req: Request, request: ToolRequest): Uint8Array | string {
  return Buffer.isBuffer(req.body) ? new Uint8Array(req.body.buffer, req.body.byteOffset, req.body.byteLength) : JSON.stringify(request.body);
}

/** `x-toolrouter-k: <n>` overrides k; `x-toolrouter-catalog: true` ranks the router's catalog instead of the request's tools. */
function rewriteOptions(req: Request, res: Response, defaultK: number): RewriteOptions {
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
  return { k, useCatalog: catalogHeader === 'true' || catalogHeader === '1', access: accessOf(res) };
}
