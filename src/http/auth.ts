import type { Request, RequestHandler, Response } from 'express';
import { Access } from '../auth/access.js';
import { readCredential, UnauthorizedError, type Auth } from '../auth/auth.js';
import { RateLimitedError } from '../auth/rate-limit.js';
import { HttpError } from './errors.js';

export interface AuthMiddlewareOptions {
  /** Paths anyone may read (probes, the console's static page); matched exactly or as a prefix ending in `/`. */
  publicPaths: readonly string[];
  /** The OpenAI-compatible proxy's paths and its key policy; absent, every path is toolrouter's own. */
  proxy?: ProxyAuthOptions;
}

export interface ProxyAuthOptions {
  /** Whether a path is the proxy's (chat completions, responses, and what is passed through to the upstream LLM). */
  isProxyPath: (path: string) => boolean;
  /**
   * With ADMIN_KEY set, whether proxy requests need a toolrouter key (`x-toolrouter-key`, or a toolrouter key as the
   * bearer token); off, a request without one goes through seeing every tool. Without ADMIN_KEY nothing is required.
   */
  requireKey: boolean;
}

/**
 * Runs before any body is parsed, so an unauthenticated caller cannot make the service read a large body. Sets
 * `res.locals.access` for the routes. A toolrouter key sent as `Authorization: Bearer` is removed from the request
 * once read: it is never forwarded to an upstream LLM or MCP server.
 */
export function authenticate(auth: Auth, options: AuthMiddlewareOptions): RequestHandler {
  const isPublic = (path: string) => options.publicPaths.some((prefix) => path === prefix || (prefix.endsWith('/') && path.startsWith(prefix)));
  return async (req, res, next) => {
    if (isPublic(req.path)) {
      res.locals.access = Access.open;
      return next();
    }
    const proxy = options.proxy?.isProxyPath(req.path) === true;
    // On the proxy a bearer token that is not toolrouter's is the LLM provider's key; elsewhere it is a wrong key.
    const credential = readCredential(req.headers, auth.settings.adminKey, !proxy && !auth.open);
    try {
      res.locals.access = await auth.authenticate(credential, req.ip ?? req.socket.remoteAddress ?? 'unknown', proxy && !options.proxy!.requireKey);
    } catch (error) {
      if (proxy) return sendOpenAiAuthError(res, error, credential === undefined && req.headers.authorization !== undefined);
      if (error instanceof UnauthorizedError) throw new HttpError(401, 'unauthorized', error.message);
      if (error instanceof RateLimitedError) throw rateLimited(error);
      throw error;
    }
    if (credential?.header === 'authorization') delete req.headers.authorization;
    next();
  };
}

/**
 * The proxy's callers are OpenAI SDKs, which read `error.type` and `error.code`: refusals before the route are answered
 * in that format too. `providerKeyOnly`: the request's Authorization carried a key that is not toolrouter's.
 */
function sendOpenAiAuthError(res: Response, error: unknown, providerKeyOnly: boolean): void {
  const send = (status: number, type: string, code: string, message: string) => res.status(status).json({ error: { message, type, param: null, code } });
  if (error instanceof UnauthorizedError) {
    const message = providerKeyOnly
      ? 'missing toolrouter key: the Authorization header carries your LLM provider\'s key (it is forwarded); send the toolrouter key in the "x-toolrouter-key" header'
      : error.message;
    send(401, 'invalid_request_error', providerKeyOnly || message.startsWith('missing') ? 'missing_api_key' : 'invalid_api_key', message);
  } else if (error instanceof RateLimitedError) {
    res.setHeader('Retry-After', String(rateLimited(error).options.retryAfterSeconds));
    send(429, 'requests', 'rate_limit_exceeded', error.message);
  } else {
    res.setHeader('Retry-After', '1');
    send(503, 'api_error', 'auth_unavailable', `keys cannot be checked right now: ${(error as Error).message}`);
  }
}

export function rateLimited(error: RateLimitedError): HttpError {
  return new HttpError(429, 'rate_limited', error.message, { retryAfterSeconds: Math.max(1, Math.ceil(error.retryAfterMs / 1000)) });
}

/** Who the request comes from (set by `authenticate`); routes mounted without it see an open service. */
export function accessOf(res: Response): Access {
  return (res.locals.access as Access | undefined) ?? Access.open;
}

/** Changes shared by everyone (keys, catalog sources, the index, search defaults) need the admin key. */
export function assertAdmin(res: Response): void {
  if (!accessOf(res).isAdmin) throw new HttpError(403, 'forbidden', 'this endpoint needs the admin key');
}

export const requireAdmin: RequestHandler = (_req: Request, res: Response, next) => {
  assertAdmin(res);
  next();
};
