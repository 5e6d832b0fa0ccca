import express, { type Express, type NextFunction, type Request, type RequestHandler, type Router } from 'express';
import type { Logger } from 'pino';
import type { Auth } from '../auth/auth.js';
import type { KeyDefaults, SecuritySettings } from '../auth/settings.js';
import { authenticate, enterRequestScope, requireAdmin, type ProxyAuthOptions } from './auth.js';
import { protectedResourceRoutes } from './routes/protected-resource.js';
import { PROTECTED_RESOURCE_PATH } from '../auth/identity/metadata.js';
import { errorHandler, notFoundRoute, type FaceErrorShape } from './errors.js';
import { hostCheck, type HostCheckOptions } from './host-check.js';
import { assertJsonDepth } from './json-depth.js';
import { JsonParseError, parseJsonInSlices } from './json-slices.js';
import { limitBytes, readBodyBytes, releaseBodyBytes } from './body-bytes.js';
import { requestLog } from './request-log.js';
import { analyticsRoutes, type AnalyticsRouteOptions } from './routes/analytics.js';
import { catalogRoutes, type CatalogRouteOptions } from './routes/catalog.js';
import { healthRoutes, type HealthRouteOptions } from './routes/health.js';
import { indexRoutes, type IndexRouteOptions } from './routes/index-status.js';
import { keyRoutes } from './routes/keys.js';
import { SEARCH_PATH, searchRoute, type SearchRouteOptions } from './routes/search.js';
import { consoleRoutes } from './routes/console.js';
import { tuningRoutes, type TuningRouteOptions } from './routes/tuning.js';
import { httpServerSpan } from '../telemetry/spans.js';
import { tracing } from '../telemetry/tracing.js';

/**
 * What the app is built from: each route's own options (the catalog, index, search and health routes declare what they
 * read), plus what the app itself mounts and checks. `metrics` also counts every request.
 */
/** Bodies from this size (by Content-Length) are parsed in slices (json-slices.ts) rather than in one JSON.parse. */
const LARGE_BODY_BYTES = 4 << 20;

export interface AppOptions extends CatalogRouteOptions, HealthRouteOptions, IndexRouteOptions, SearchRouteOptions, AnalyticsRouteOptions {
  log: Logger;
  bodyLimit: string;
  /** Deepest JSON nesting accepted in a request body (limits.jsonDepth). */
  jsonDepth?: number;
  /** Routers of the other faces (MCP, chat proxy), mounted after the core API and before the 404 handler. */
  routers?: Router[];
  /** Paths whose router reads the body itself, raw (the chat proxy forwards it byte for byte); the JSON parser skips them. */
  rawBodyPaths?: readonly string[];
  /** The OpenAI-compatible proxy's paths (bodies read raw) and whether they need a key. */
  proxy?: ProxyAuthOptions;
  /**
   * How the other faces answer errors on their paths, wherever raised (a route, or auth, rate limits and body parsing
   * before one): OpenAI's shape on the proxy's, JSON-RPC on /mcp. Every other path gets toolrouter's REST shape.
   */
  errorShapes?: FaceErrorShape[];
  /** Evaluation and run-time search settings (admin); absent, those routes are not served. */
  tuning?: TuningRouteOptions;
  /** The web console's static files (src/console, or dist/src/console once built); absent, /console is not served. */
  consoleDir?: string;
  /** Keys and limits; absent (tests of single routes), every request is treated as coming from the admin. */
  auth?: Auth;
  security?: SecuritySettings;
  /** Host and Origin checks on every route (open mode: no ADMIN_KEY, or bound to loopback); absent, none. */
  hostCheck?: HostCheckOptions;
  keyDefaults?: KeyDefaults;
}

const DEFAULT_JSON_DEPTH = 64;

/**
 * Reachable without a key: probes, the console's static page (its API calls carry the key), the browser's return
 * from an upstream's authorization server (guarded by its single-use `state` and the flow's binding cookie), the
 * connect page before it (which checks the starter's key itself, from a form) and the client metadata document that
 * authorization servers fetch (src/mcp/upstream/oauth/routes.ts).
 */
const PUBLIC_PATHS = ['/health', '/ready', '/console', '/console/', '/favicon.ico', '/oauth/callback', '/oauth/connect/', '/oauth/client-metadata.json', PROTECTED_RESOURCE_PATH, `${PROTECTED_RESOURCE_PATH}/`];

export function createApp(options: AppOptions): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  // Every answer is computed per request (POST searches above all): a SHA-1 of each body for an ETag nobody revalidates
  // against is pure cost on the search path.
  app.set('etag', false);
  if (options.security) app.set('trust proxy', options.security.trustProxy);
  const countRequest: RequestHandler = (req, res, next) => {
    // The matched route pattern, not the path, keeps label values few (a source name is not a label).
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      options.metrics.httpRequests.inc({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  };
  // The server span comes first so the rest of the chain runs inside it; without tracing it is not mounted at all.
  const everyRequest: RequestHandler[] = [...(tracing.enabled ? [httpServerSpan as RequestHandler] : []), requestLog(options.log), countRequest];
  // Before auth and before any body is read: a rebound page gets nothing, not even a 401.
  if (options.hostCheck) everyRequest.push(hostCheck(options.hostCheck));
  // The root has no API of its own: a person opening the service's address lands on the console, which asks for a
  // key itself. Before authentication (a browser cannot add a key to a navigation), after the Host check. Not a
  // public path: public paths ending in '/' are prefixes, and '/' would open everything.
  if (options.consoleDir) app.get('/', ...everyRequest, (_req, res) => res.redirect(302, '/console/'));
  if (options.auth) everyRequest.push(authenticate(options.auth, { publicPaths: options.security?.publicMetrics ? [...PUBLIC_PATHS, '/metrics'] : PUBLIC_PATHS, proxy: options.proxy }));
  const maxDepth = options.jsonDepth ?? DEFAULT_JSON_DEPTH;
  // Depth is checked on the raw bytes before parsing (verify runs first), so a hostile body is refused unparsed.
  const smallJson = express.json({ limit: options.bodyLimit, strict: true, verify: (_req, _res, bytes) => assertJsonDepth(bytes, maxDepth) });
  // A large body (a catalog of tens of thousands of tools) is read as bytes and parsed a slice at a time, so its parse
  // does not hold every other request (the index status, health) for a second or more.
  // Compressed bodies are inflated by body-parser; plain ones (what catalog uploads are) are read into one buffer of the
  // declared length (body-bytes.ts), held only until parsed: body-parser held such a body twice at its peak.
  const rawJson = express.raw({ limit: options.bodyLimit, type: 'application/json' });
  const bodyLimitBytes = limitBytes(options.bodyLimit);
  const parseLarge = (bytes: Buffer, req: Request, next: NextFunction) => {
    parseJsonInSlices(bytes, maxDepth)
      .finally(() => releaseBodyBytes(bytes))
      .then((body) => {
        if (body === null || typeof body !== 'object') return next(new JsonParseError('the JSON body must be an object or an array'));
        req.body = body;
        next();
      }, next);
  };
  const json: RequestHandler = (req, res, next) => {
    const length = Number(req.headers['content-length'] ?? 0);
    if (length < LARGE_BODY_BYTES || !req.is('application/json')) return smallJson(req, res, next);
    const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
    if (encoding === 'identity' && Number.isFinite(bodyLimitBytes) && Number.isSafeInteger(length)) {
      // body-parser's mark that the body has been read, so no later parser waits for it again.
      (req as { _body?: boolean })._body = true;
      readBodyBytes(req, length, bodyLimitBytes).then((bytes) => parseLarge(bytes, req, next), next);
      return;
    }
    rawJson(req, res, (error?: unknown) => {
      if (error !== undefined) return next(error);
      if (!Buffer.isBuffer(req.body)) return next();
      const bytes = req.body;
      req.body = undefined;
      parseLarge(bytes, req, next);
    });
  };
  const rawBodyPaths = new Set(options.rawBodyPaths ?? []);
  // Search is what agents call on every turn. Mounted first with the chain every route gets, it skips the walk through
  // every router mounted before it: at 10k tools that walk was about 0.2 ms of a request's p50, measured against a bare
  // node:http server running the same search in the same process. Errors still go to the handler at the end.
  app.post(SEARCH_PATH, ...everyRequest, json, searchRoute(options));
  app.use(...everyRequest);
  if (options.auth) app.get('/metrics', requireAdmin);
  app.use((req, res, next) => (rawBodyPaths.has(req.path) ? next() : json(req, res, next)));
  // After the body is read: from here on the request's scope follows every await down to the upstream calls.
  app.use(enterRequestScope);
  if (options.auth?.identity) app.use(protectedResourceRoutes(options.auth.identity));
  if (options.auth) app.use(keyRoutes({ store: options.auth.store, defaults: options.keyDefaults ?? { tool_search_enabled: true } }));
  app.use(healthRoutes(options));
  app.use(catalogRoutes(options));
  app.use(indexRoutes(options));
  if (options.tuning) app.use(tuningRoutes(options.tuning));
  app.use(analyticsRoutes(options));
  if (options.consoleDir) app.use(consoleRoutes(options.consoleDir));
  for (const router of options.routers ?? []) app.use(router);
  app.use(notFoundRoute);
  app.use(errorHandler(options.log, options.errorShapes));
  return app;
}
