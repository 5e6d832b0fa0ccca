import type { Application, Request, RequestHandler, Response } from 'express';
import { Access } from '../auth/access.js';
import { readCredential, UnauthorizedError, type Auth } from '../auth/auth.js';
import { ToolrouterError } from '../errors.js';

export interface AuthMiddlewareOptions {
  /** Paths anyone may read (probes, the console's static page); matched exactly or as a prefix ending in `/`. */
  publicPaths: readonly string[];
  /** The OpenAI-compatible proxy's paths and its key policy; absent, every path is toolrouter's own. */
  proxy?: ProxyAuthOptions;
}

export interface ProxyAuthOptions {
  /**
   * Whether a path is the proxy's (chat completions, responses, and what is passed through to the upstream LLM); `app`
   * is the app serving it, whose mounted routes say which /v1 paths are toolrouter's own.
   */
  isProxyPath: (path: string, app: Application) => boolean;
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
    const proxy = options.proxy?.isProxyPath(req.path, req.app) === true;
    // On the proxy a bearer token that is not toolrouter's is the LLM provider's key; elsewhere it is a wrong key.
    const credential = readCredential(req.headers, auth.settings.adminKey, !proxy && !auth.open);
    try {
      res.locals.access = await auth.authenticate(credential, req.ip ?? req.socket.remoteAddress ?? 'unknown', proxy && !options.proxy!.requireKey);
    } catch (error) {
      // Thrown on to the app's error handler, which answers in the shape of the face the path belongs to.
      throw proxy ? proxyAuthError(error, credential === undefined && req.headers.authorization !== undefined) : error;
    }
    if (credential?.header === 'authorization') delete req.headers.authorization;
    next();
  };
}

/**
 * What a refused proxy request is told. `providerKeyOnly`: the request's Authorization carried a key that is not
 * toolrouter's, so the key is missing, not wrong. A failure to check keys at all is `auth_unavailable` there (the
 * proxy's callers are SDKs that retry on 503), where toolrouter's own routes report the cause itself.
 */
function proxyAuthError(error: unknown, providerKeyOnly: boolean): unknown {
  if (error instanceof UnauthorizedError && providerKeyOnly) {
    return new UnauthorizedError(
      'missing toolrouter key: the Authorization header carries your LLM provider\'s key (it is forwarded); send the toolrouter key in the "x-toolrouter-key" header',
      'missing',
    );
  }
  if (error instanceof UnauthorizedError || (error instanceof ToolrouterError && error.code === 'rate_limited')) return error;
  return new ToolrouterError('auth_unavailable', `keys cannot be checked right now: ${(error as Error).message}`, { retryAfterSeconds: 1, cause: error });
}

/** Who the request comes from (set by `authenticate`); routes mounted without it see an open service. */
export function accessOf(res: Response): Access {
  return (res.locals.access as Access | undefined) ?? Access.open;
}

/** Changes shared by everyone (keys, catalog sources, the index, search defaults) need the admin key. */
export function assertAdmin(res: Response): void {
  if (!accessOf(res).isAdmin) throw new ToolrouterError('forbidden', 'this endpoint needs the admin key');
}

export const requireAdmin: RequestHandler = (_req: Request, res: Response, next) => {
  assertAdmin(res);
  next();
};
