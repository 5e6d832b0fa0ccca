import express, { Router, type Request } from 'express';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { Config } from '../config/config.js';
import type { Embedder } from '../embedding/embedder.js';
import { chatTokensSaved, chatToolsDropped, chatToolsKept } from '../metrics.js';
import type { SearchService } from '../search/search.js';
import { OpenAiError, invalidRequest, openAiErrorHandler } from './errors.js';
import { forwardChatCompletion } from './proxy.js';
import { parseChatRequest, parseChatRequestBytes, type ChatRequest } from './request.js';
import { ChatRewriter, type RewriteOptions } from './rewriter.js';
import { ToolIndexCache } from './tool-index-cache.js';

export const CHAT_COMPLETIONS_PATH = '/v1/chat/completions';
export const REWRITE_PATH = '/v1/tools/rewrite';
/** Routes that read their body raw (see createApp): forwarded byte for byte, and malformed JSON answered OpenAI-style. */
export const CHAT_RAW_BODY_PATHS = [CHAT_COMPLETIONS_PATH, REWRITE_PATH];

/** Most tools a request may ask to keep through `x-toolrouter-k`. */
const MAX_K = 1_000;

export interface ChatDependencies {
  config: Config;
  catalog: Catalog;
  search: SearchService;
  embedder: Embedder;
  log: Logger;
}

/**
 * The OpenAI-compatible face: `POST /v1/chat/completions` forwards requests upstream with their tool list cut to
 * what the conversation needs, and `POST /v1/tools/rewrite` shows that decision without forwarding.
 */
export function chatRoutes({ config, catalog, search, embedder, log }: ChatDependencies): Router {
  const router = Router();
  const rewriter = new ChatRewriter({
    catalog,
    search,
    embedder,
    settings: config.search,
    maxQueryLength: config.search.maxQueryLength,
    cache: new ToolIndexCache({
      size: config.chat.toolIndexCacheSize,
      embedder,
      lexical: config.search.lexical,
      hnsw: config.search.hnsw,
    }),
  });
  const rawBody = express.raw({ type: () => true, limit: config.bodyLimit });

  router.post(CHAT_COMPLETIONS_PATH, rawBody, async (req, res) => {
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
    const request = readRequest(req);
    const { body, decision } = await rewriter.rewrite(request, rewriteOptions(req, config.chat.k));
    const labels = { mode: decision.mode };
    chatToolsKept.inc(labels, decision.kept.length);
    chatToolsDropped.inc(labels, decision.dropped.length);
    chatTokensSaved.inc(labels, decision.tokens.saved);
    log.debug({ mode: decision.mode, kept: decision.kept.length, total: decision.total, cache: decision.cache }, 'chat tools rewritten');
    res.setHeader('x-toolrouter-tools', `${decision.kept.length}/${decision.total}`);
    // Unchanged requests go upstream as the very bytes the caller sent.
    const forwarded = body === undefined ? rawBytes(req, request) : JSON.stringify(body);
    await forwardChatCompletion(req, res, forwarded, { url: upstreamUrl, key: config.chat.upstreamKey, timeoutMs: config.chat.timeoutMs }, log);
  });

  router.post(REWRITE_PATH, rawBody, async (req, res) => {
    const request = readRequest(req);
    const { body, decision } = await rewriter.rewrite(request, rewriteOptions(req, config.chat.k));
    res.setHeader('x-toolrouter-tools', `${decision.kept.length}/${decision.total}`);
    res.json({ request: body ?? request.body, decision });
  });

  router.use(openAiErrorHandler(log));
  return router;
}

/** The body arrives raw (Buffer); if an app-level JSON parser got to it first, its parsed form is used instead. */
function readRequest(req: Request): ChatRequest {
  return Buffer.isBuffer(req.body) ? parseChatRequestBytes(req.body) : parseChatRequest(req.body);
}

function rawBytes(req: Request, request: ChatRequest): Uint8Array | string {
  return Buffer.isBuffer(req.body) ? new Uint8Array(req.body.buffer, req.body.byteOffset, req.body.byteLength) : JSON.stringify(request.body);
}

/** `x-toolrouter-k: <n>` overrides k; `x-toolrouter-catalog: true` ranks the router's catalog instead of the request's tools. */
function rewriteOptions(req: Request, defaultK: number): RewriteOptions {
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
  return { k, useCatalog: catalogHeader === 'true' || catalogHeader === '1' };
}
