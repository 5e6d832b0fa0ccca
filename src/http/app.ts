import express, { type Express, type Router } from 'express';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { IndexManager, IndexPipeline } from '../index/manager.js';
import type { SearchService } from '../search/search.js';
import { errorHandler, notFoundRoute } from './errors.js';
import { catalogRoutes } from './routes/catalog.js';
import { healthRoutes } from './routes/health.js';
import { indexRoutes } from './routes/index-status.js';
import { searchRoutes } from './routes/search.js';

export interface AppDependencies {
  catalog: Catalog;
  indexes: IndexManager;
  pipeline: IndexPipeline;
  search: SearchService;
  log: Logger;
  bodyLimit: string;
  maxQueryLength: number;
  /** Routers of the other faces (MCP, chat proxy), mounted after the core API and before the 404 handler. */
  routers?: Router[];
}

export function createApp(deps: AppDependencies): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use(express.json({ limit: deps.bodyLimit, strict: true }));
  app.use(healthRoutes(deps));
  app.use(catalogRoutes(deps));
  app.use(indexRoutes(deps));
  app.use(searchRoutes(deps));
  for (const router of deps.routers ?? []) app.use(router);
  app.use(notFoundRoute);
  app.use(errorHandler(deps.log));
  return app;
}
