import type { Server } from 'node:http';
import type { Express, Router } from 'express';
import type { Logger } from 'pino';
import { Catalog } from './catalog/catalog.js';
import { CHAT_RAW_BODY_PATHS, chatRoutes } from './chat/routes.js';
import type { Config } from './config/config.js';
import { createEmbedder, type Embedder } from './embedding/embedder.js';
import { createApp } from './http/app.js';
import { startIndexing } from './index/indexing.js';
import type { IndexManager, IndexPipeline } from './index/manager.js';
import { createLogger } from './log.js';
import { createMcpFaces, type McpFaces } from './mcp/index.js';
import { SearchService } from './search/search.js';

export interface Toolrouter {
  config: Config;
  catalog: Catalog;
  indexes: IndexManager;
  pipeline: IndexPipeline;
  search: SearchService;
  embedder: Embedder;
  app: Express;
  log: Logger;
  /** MCP gateway: upstream servers, the gateway, and its /mcp and /mcp-rest faces. */
  mcp: McpFaces;
  /** Stops background work and closes connections (upstreams, Redis), last opened first. */
  close(): Promise<void>;
}

/** Wires catalog → index → search → interfaces for one process. */
export async function createToolrouter(config: Config, options: { log?: Logger; embedder?: Embedder } = {}): Promise<Toolrouter> {
  const log = options.log ?? createLogger(config.logLevel);
  const closers: (() => Promise<void> | void)[] = [];
  const embedder =
    options.embedder ??
    (await createEmbedder(config.embedding));
  const catalog = new Catalog({ separator: config.catalog.separator });
  for (const [source, tools] of Object.entries(config.catalog.sources)) catalog.setSource(source, tools);

  const { indexes, pipeline, sources, close: stopIndexing } = await startIndexing(config, catalog, embedder, log);
  closers.push(stopIndexing);

  const search = new SearchService(catalog, indexes, embedder, config.search);

  // The other faces (MCP gateway, chat proxy) add their routers here.
  const routers: Router[] = [];
  routers.push(chatRoutes({ config, catalog, search, embedder, log }));
  const mcp = createMcpFaces({ config, catalog, search, log, loopbackOnly: isLoopback(config.host) });
  routers.push(...mcp.routers);
  closers.push(() => mcp.close());

  const app = createApp({
    catalog,
    sources,
    indexes,
    pipeline,
    search,
    log,
    bodyLimit: config.bodyLimit,
    maxQueryLength: config.search.maxQueryLength,
    routers,
    rawBodyPaths: CHAT_RAW_BODY_PATHS,
  });
  const close = async () => {
    for (const closer of [...closers].reverse()) await closer();
  };
  return { config, catalog, indexes, pipeline, search, embedder, app, log, mcp, close };
}

export async function listen(router: Toolrouter): Promise<Server> {
  const { config, log } = router;
  if (!config.adminKey && !isLoopback(config.host)) {
    throw new Error(`refusing to listen on ${config.host} without ADMIN_KEY: an open service binds to loopback only`);
  }
  const server = await new Promise<Server>((resolve, reject) => {
    const started = router.app.listen(config.port, config.host, (error?: Error) => (error ? reject(error) : resolve(started)));
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  log.info({ host: config.host, port, model: router.embedder.modelId, auth: config.adminKey ? 'admin key' : 'open (loopback only)' }, 'toolrouter listening');
  return server;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}
