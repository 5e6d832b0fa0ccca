import type { Request, RequestHandler, Response } from 'express';
import { Access } from '../auth/access.js';
import { readCredential, UnauthorizedError, type Auth } from '../auth/auth.js';
import { RateLimitedError } from '../auth/rate-limit.js';
import { HttpError } from './errors.js';

export interface AuthMiddlewareOptions {
  /** Paths anyone may read (probes, the console's static page); matched exactly or as a prefix ending in `/`. */
  publicPaths: readonly string[];
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
    const credential = readCredential(req.headers, auth.settings.adminKey);
    try {
      res.locals.access = await auth.authenticate(credential, req.ip ?? req.socket.remoteAddress ?? 'unknown');
    } catch (error) {
      if (error instanceof UnauthorizedError) throw new HttpError(401, 'unauthorized', error.message);
      if (error instanceof RateLimitedError) throw rateLimited(error);
      throw error;
    }
    if (credential?.header === 'authorization') delete req.headers.authorization;
    next();
  };
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
