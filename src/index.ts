/**
 * toolrouter as a library: load a configuration, create a toolrouter (catalog, index, search and the HTTP/MCP faces
 * wired together) and listen, or use its search service directly.
 *
 *   import { createToolrouter, listen, loadConfig } from 'toolrouter';
 *   const router = await createToolrouter(loadConfig(process.env, { port: 0 }));
 *   const server = await listen(router);
 *   const { results } = await router.search.search({ query: 'send an email' });
 */
export { createToolrouter, listen, type Toolrouter } from './server.js';
export { configSchema, ConfigError, loadConfig, type Config } from './config/config.js';
export {
  IndexNotReadyError,
  SEARCH_MODES,
  SearchService,
  type SearchHit,
  type SearchMode,
  type SearchRequest,
  type SearchResponse,
  type SearchSettings,
} from './search/search.js';
export { Catalog, CatalogConflictError, type CatalogEntry } from './catalog/catalog.js';
export type { CatalogTool, JsonSchemaObject, Tool, ToolAnnotations } from './catalog/types.js';
export { createEmbedder, OFFLINE_MODEL_ID, type Embedder, type EmbedderOptions } from './embedding/embedder.js';
export type { IndexManager, IndexState, IndexStatus } from './indexing/manager.js';
export { Metrics } from './metrics.js';
export { gracefulShutdown } from './shutdown.js';
