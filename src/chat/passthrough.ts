import express, { Router, type Request } from 'express';
import type { Logger } from 'pino';
import { openAiErrorHandler } from './errors.js';
import { forwardRequest } from './proxy.js';

/**
 * First path segments under /v1 that are toolrouter's own REST API (`/v1/tools/search`, `/v1/catalog`, ...). Everything
 * else under /v1 that toolrouter does not serve belongs to the upstream LLM's API (`/v1/models`, `/v1/embeddings`, ...).
 */
export const OWN_V1_SEGMENTS: ReadonlySet<string> = new Set(['tools', 'catalog', 'index', 'mcp', 'search', 'eval', 'feedback', 'keys', 'key']);

/** Paths of the OpenAI-compatible face: the two rewritten routes and whatever is passed through to the upstream. */
export function isProxyPath(path: string): boolean {
  const segment = /^\/v1\/([^/]+)/.exec(path)?.[1];
  return segment !== undefined && !OWN_V1_SEGMENTS.has(segment);
}

export interface PassthroughSettings {
  upstreamUrl: string | undefined;
  upstreamKey?: string;
  timeoutMs: number;
  bodyLimit: string;
}

/**
 * `GET /v1/models` and every other `/v1/*` route the proxy does not rewrite, sent to the upstream unchanged: front-ends
 * that list models first, embeddings, moderation... Mounted after every route of toolrouter's own, so it only sees
 * what nothing else answered, and never toolrouter's own REST paths (those still get their 404 or 405).
 */
export function passthroughRoutes(settings: PassthroughSettings, log: Logger): Router {
  const router = Router();
  const raw = express.raw({ type: () => true, limit: settings.bodyLimit });
  // Read raw, to forward the very bytes; a JSON body the app's parser already read is forwarded re-serialised.
  router.use((req, res, next) => (isProxyPath(req.path) ? raw(req, res, next) : next()));
  router.use(async (req, res, next) => {
    // Without an upstream there is nothing to pass to: unknown paths get toolrouter's own 404.
    if (!isProxyPath(req.path) || !settings.upstreamUrl) return next();
    const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : requestBytes(req);
    await forwardRequest(req, res, body, { url: settings.upstreamUrl, api: 'passthrough', key: settings.upstreamKey, timeoutMs: settings.timeoutMs }, log);
  });
  router.use(openAiErrorHandler(log));
  return router;
}

function requestBytes(req: Request): Uint8Array | string | undefined {
  if (Buffer.isBuffer(req.body)) return req.body.byteLength === 0 ? undefined : new Uint8Array(req.body.buffer, req.body.byteOffset, req.body.byteLength);
  return req.body === undefined ? undefined : JSON.stringify(req.body);
}
