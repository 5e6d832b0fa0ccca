import express, { type Express, type Router } from 'express';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { StaticSources } from '../catalog/static-sources.js';
import type { IndexManager, IndexPipeline } from '../index/manager.js';
import type { SearchService } from '../search/search.js';
import { httpRequests } from '../metrics.js';
import { errorHandler, notFoundRoute } from './errors.js';
import { catalogRoutes } from './routes/catalog.js';
import { healthRoutes } from './routes/health.js';
import { indexRoutes } from './routes/index-status.js';
import { searchRoutes } from './routes/search.js';

export interface AppDependencies {
  catalog: Catalog;
  sources: StaticSources;
  indexes: IndexManager;
  pipeline: IndexPipeline;
  search: SearchService;
  log: Logger;
  bodyLimit: string;
  maxQueryLength: number;
  /** Routers of the other faces (MCP, chat proxy), mounted after the core API and before the 404 handler. */
  routers?: Router[];
  /** Paths whose router reads the body itself, raw (the chat proxy forwards it byte for byte); the JSON parser skips them. */
  rawBodyPaths?: readonly string[];
}

export function createApp(deps: AppDependencies): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use((req, res, next) => {
    // The matched route pattern, not the path, keeps label values few (a source name is not a label).
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      httpRequests.inc({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  });
  const json = express.json({ limit: deps.bodyLimit, strict: true });
  const rawBodyPaths = new Set(deps.rawBodyPaths ?? []);
  app.use((req, res, next) => (rawBodyPaths.has(req.path) ? next() : json(req, res, next)));
  app.use(healthRoutes(deps));
  app.use(catalogRoutes(deps));
  app.use(indexRoutes(deps));
  app.use(searchRoutes(deps));
  for (const router of deps.routers ?? []) app.use(router);
  app.use(notFoundRoute);
  app.use(errorHandler(deps.log));
  return app;
}
