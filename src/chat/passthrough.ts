import express, { Router, type Application, type Request } from 'express';
import type { Logger } from 'pino';
import { anthropicErrorHandler } from './anthropic/errors.js';
import { openAiErrorHandler } from './openai/errors.js';
import { forwardRequest } from './core/proxy.js';
import { CHAT_COMPLETIONS_PATH, COUNT_TOKENS_PATH, MESSAGES_PATH, RESPONSES_PATH, isAnthropicPath } from './routes.js';

/**
 * Routes the chat face serves that are OpenAI's API (their errors are OpenAI-shaped), not toolrouter's own, though
 * toolrouter answers them.
 */
const OPENAI_ROUTES: ReadonlySet<string> = new Set([CHAT_COMPLETIONS_PATH, RESPONSES_PATH, MESSAGES_PATH, COUNT_TOKENS_PATH]);

/** The app's own first /v1 segments, read from its route table on first use (every router is mounted by then). */
const ownSegmentsByApp = new WeakMap<object, ReadonlySet<string>>();

/**
 * First path segments under /v1 that are toolrouter's own REST API (`/v1/tools/search`, `/v1/catalog`, ...): those of
 * the routes mounted in `app`, so a route added anywhere is never passed upstream and nothing needs listing by hand.
 * Everything else under /v1 belongs to the upstream LLM's API (`/v1/models`, `/v1/embeddings`, ...).
 */
export function ownV1Segments(app: Application): ReadonlySet<string> {
  let segments = ownSegmentsByApp.get(app);
  if (!segments) {
    const own = new Set<string>();
    for (const path of routePaths((app as unknown as { router: { stack: Layer[] } }).router.stack)) {
      const segment = /^\/v1\/([^/]+)/.exec(path)?.[1];
      if (segment !== undefined && !OPENAI_ROUTES.has(path)) own.add(segment);
    }
    segments = own;
    ownSegmentsByApp.set(app, segments);
  }
  return segments;
}

/** Express's route table as it stands: a layer is a route, or a router with its own stack. */
interface Layer {
  route?: { path: string | string[] };
  handle?: { stack?: Layer[] };
}

function routePaths(stack: readonly Layer[]): string[] {
  return stack.flatMap((layer) => {
    if (layer.route) return Array.isArray(layer.route.path) ? layer.route.path : [layer.route.path];
    return layer.handle?.stack ? routePaths(layer.handle.stack) : [];
  });
}

/** Paths of the OpenAI-compatible face: the two rewritten routes and whatever is passed through to the upstream. */
export function isProxyPath(path: string, app: Application): boolean {
  const segment = /^\/v1\/([^/]+)/.exec(path)?.[1];
  return segment !== undefined && !ownV1Segments(app).has(segment);
}

export interface PassthroughSettings {
  upstreamUrl: string | undefined;
  upstreamKey?: string;
  /** Anthropic's base URL: requests of Anthropic's API (under /v1/messages, or carrying `anthropic-version`) go there. */
  anthropicUrl?: string;
  anthropicKey?: string;
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
  router.use((req, res, next) => (isProxyPath(req.path, req.app) ? raw(req, res, next) : next()));
  // Anthropic's routes that are not rewritten (`/v1/messages/batches`, and `/v1/models` or `/v1/files` as the Anthropic
  // SDKs call them, with their `anthropic-version` header, so they do not clash with OpenAI's routes of the same name).
  const anthropic = Router();
  anthropic.use(async (req, res, next) => {
    const anthropicRequest = isAnthropicPath(req.path) || req.get('anthropic-version') !== undefined;
    if (!isProxyPath(req.path, req.app) || !anthropicRequest || !settings.anthropicUrl) return next();
    const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : requestBytes(req);
    const key = settings.anthropicKey;
    await forwardRequest(req, res, body, { url: settings.anthropicUrl, route: 'whole-path', keyHeader: 'x-api-key', ...(key ? { key } : {}), timeoutMs: settings.timeoutMs }, log);
  });
  anthropic.use(anthropicErrorHandler(log));
  router.use(anthropic);
  router.use(async (req, res, next) => {
    // Without an upstream there is nothing to pass to: unknown paths get toolrouter's own 404.
    if (!isProxyPath(req.path, req.app) || !settings.upstreamUrl) return next();
    const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : requestBytes(req);
    await forwardRequest(req, res, body, { url: settings.upstreamUrl, route: 'below-v1', keyHeader: 'authorization', key: settings.upstreamKey, timeoutMs: settings.timeoutMs }, log);
  });
  router.use(openAiErrorHandler(log));
  return router;
}

function requestBytes(req: Request): Uint8Array | string | undefined {
  if (Buffer.isBuffer(req.body)) return req.body.byteLength === 0 ? undefined : new Uint8Array(req.body.buffer, req.body.byteOffset, req.body.byteLength);
  return req.body === undefined ? undefined : JSON.stringify(req.body);
}
