import type { Application, Request, RequestHandler, Response } from 'express';
import { Access } from '../auth/access.js';
import { readCredential, UnauthorizedError, type Auth } from '../auth/auth.js';
import { originOf } from '../auth/identity/metadata.js';
import { runInRequestScope, UPSTREAM_HEADER_PREFIX, type RequestScope } from '../auth/request-context.js';
import { ToolrouterError } from '../errors.js';

/** The header an `assert_user` key names its user in. */
export const ASSERTED_USER_HEADER = 'x-toolrouter-user';
/** Upstream credentials one request may carry, and how long each may be: bounded before anything reads them. */
const MAX_UPSTREAM_HEADERS = 32;
const MAX_UPSTREAM_HEADER_CHARS = 8_192;
/** A user name as a key asserts it: an identifier, not free text (it keys stored grants and shows in the admin's lists). */
const ASSERTED_USER = /^[A-Za-z0-9._@+:|=-]{1,255}$/;

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
    // Taken off the request before anything else reads it: never forwarded to an LLM, never logged (src/auth/request-context.ts).
    res.locals.requestScope = requestScope(req);
    // On the proxy a bearer token that is not toolrouter's is the LLM provider's key; elsewhere it is a wrong key.
    const credential = readCredential(req.headers, auth.settings.adminKey, !proxy && !auth.open);
    let access: Access;
    try {
      access = await auth.authenticate(credential, req.ip ?? req.socket.remoteAddress ?? 'unknown', proxy && !options.proxy!.requireKey);
    } catch (error) {
      // A client that speaks OAuth learns from the challenge where to get a token (RFC 9728); the proxy's callers are
      // LLM SDKs, told in their own shape instead.
      if (!proxy && auth.identity) challenge(res, auth, req, error, credential !== undefined);
      // Thrown on to the app's error handler, which answers in the shape of the face the path belongs to.
      throw proxy ? proxyAuthError(error, credential === undefined && req.headers.authorization !== undefined) : error;
    }
    res.locals.access = assertedUser(access, req.headers[ASSERTED_USER_HEADER]);
    if (credential?.header === 'authorization') delete req.headers.authorization;
    next();
  };
}

/**
 * Runs the rest of the request (mounted after the body is parsed: body-parser's stream events would lose the async
 * context) with its RequestScope, so an upstream call it causes can read it.
 */
export const enterRequestScope: RequestHandler = (_req, res, next) => {
  const scope = res.locals.requestScope as RequestScope | undefined;
  if (!scope) return next();
  runInRequestScope(scope, next);
};

function requestScope(req: Request): RequestScope {
  const upstreamHeaders = new Map<string, string>();
  for (const name of Object.keys(req.headers)) {
    if (!name.startsWith(UPSTREAM_HEADER_PREFIX)) continue;
    const value = req.headers[name];
    delete req.headers[name];
    if (upstreamHeaders.size >= MAX_UPSTREAM_HEADERS) throw new ToolrouterError('invalid_request', `at most ${MAX_UPSTREAM_HEADERS} ${UPSTREAM_HEADER_PREFIX}* headers per request`);
    if (typeof value !== 'string' || value.length > MAX_UPSTREAM_HEADER_CHARS) {
      throw new ToolrouterError('invalid_request', `header ${name.slice(0, 100)} must be one value of at most ${MAX_UPSTREAM_HEADER_CHARS} characters`);
    }
    upstreamHeaders.set(name, value);
  }
  return { origin: originOf({ protocol: req.protocol, host: req.get('host') }), upstreamHeaders };
}

/** A key marked `assert_user` acts for the user it names; any other key naming one is refused rather than ignored. */
function assertedUser(access: Access, header: string | string[] | undefined): Access {
  if (header === undefined) return access;
  if (!access.key?.assertUser) {
    throw new ToolrouterError('forbidden', `${ASSERTED_USER_HEADER} is only accepted from a key generated with assert_user: true`);
  }
  if (typeof header !== 'string' || !ASSERTED_USER.test(header)) {
    throw new ToolrouterError('invalid_request', `${ASSERTED_USER_HEADER} must be a user id of 1-255 letters, digits and ._@+:|=-`);
  }
  return access.asUser(header);
}

/** WWW-Authenticate for a refused request: where the protected resource metadata is, and why a token was refused. */
function challenge(res: Response, auth: Auth, req: Request, error: unknown, presented: boolean): void {
  const origin = { protocol: req.protocol, host: req.get('host') };
  if (error instanceof UnauthorizedError) {
    res.setHeader('WWW-Authenticate', auth.identity!.challenge(origin, presented ? { error: 'invalid_token', description: error.message } : undefined));
  } else if (error instanceof ToolrouterError && error.reason === 'insufficient_scope') {
    res.setHeader('WWW-Authenticate', auth.identity!.challenge(origin, { error: 'insufficient_scope', description: error.message, scope: auth.identity!.settings.requiredScopes }));
  }
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
