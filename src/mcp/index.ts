import type { Router } from 'express';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { IndexManager } from '../indexing/manager.js';
import { mcpRestRoutes } from './rest-routes.js';
import type { Metrics } from '../metrics.js';
import type { SearchService } from '../search/search.js';
import type { FeedbackRecorder } from '../feedback/service.js';
import type { SearchConfig } from '../search/settings.js';
import type { RedisBus } from '../redis/bus.js';
import { McpGateway } from './gateway.js';
import { OAuthManager } from './oauth/manager.js';
import { oauthRoutes } from './oauth/routes.js';
import { mcpHttpFace, type McpHttpFace } from './http.js';
import { StartupGate } from './startup.js';
import type { McpSettings } from './settings.js';
import { UpstreamManager, type UpstreamStatus } from './upstream.js';

/** The configuration slices the MCP gateway reads, handed in by the assembly (src/server.ts). */
export interface McpConfig {
  mcp: McpSettings;
  catalog: { separator: string };
  search: Pick<SearchConfig, 'activation' | 'maxQueryLength'>;
}

export interface McpFaces {
  upstreams: UpstreamManager;
  gateway: McpGateway;
  http: McpHttpFace;
  /** /mcp (streamable HTTP), /mcp-rest/* (LiteLLM-compatible REST) and /v1/mcp/servers (upstream status). */
  routers: Router[];
  close(): Promise<void>;
}

/**
 * Wires the MCP gateway: upstream connections feeding the catalog, the gateway over catalog and search, and its HTTP
 * faces. Upstreams start connecting in the background; startup never waits for a slow or dead server.
 */
export function createMcpFaces(deps: {
  config: McpConfig;
  catalog: Catalog;
  search: SearchService;
  log: Logger;
  loopbackOnly: boolean;
  feedback?: FeedbackRecorder;
  /** For the start-up wait: the first searches wait (bounded) for the index to include the upstreams' tools. */
  indexes?: IndexManager;
  /** The router's metrics (upstream status gauges); without it nothing is counted. */
  metrics?: Metrics;
  /** With Redis, OAuth grants of upstream servers are shared by every instance (src/mcp/oauth/store.ts). */
  bus?: RedisBus;
  /** Without Redis, OAuth grants are also kept in `<stateDir>/oauth.json`. */
  stateDir?: string;
}): McpFaces {
  const { config, catalog, search, log } = deps;
  const mcp = config.mcp;
  const oauth = new OAuthManager({ servers: mcp.servers, settings: mcp.oauth, bus: deps.bus, stateDir: deps.stateDir, log });
  const upstreams = new UpstreamManager(catalog, {
    servers: mcp.servers,
    separator: config.catalog.separator,
    reconnect: mcp.reconnect,
    connectTimeoutMs: mcp.connectTimeoutMs,
    pingIntervalMs: mcp.pingIntervalMs,
    transforms: mcp.transforms,
    auth: (server) => oauth.auth(server),
    log: log.child({ component: 'upstreams' }),
  });
  // A grant obtained or renewed by any instance: the servers waiting for one connect now rather than at their next retry.
  const connectAuthorized = (server: string | undefined) => {
    for (const status of upstreams.status()) if (oauth.has(status.name) && (server === undefined || status.name === server)) upstreams.reconnectNow(status.name);
  };
  void oauth.start(connectAuthorized).catch((error: unknown) => log.warn({ err: error }, 'not following OAuth grant changes of other instances; servers pick them up at their next retry'));
  // Without the index manager (tests of the gateway alone) the wait covers the upstreams only.
  const startup = new StartupGate(upstreams, catalog, deps.indexes, mcp.startupWaitMs);
  const gateway = new McpGateway(
    catalog,
    upstreams,
    search,
    {
      search: mcp.search,
      activation: config.search.activation,
      searchToolName: mcp.searchToolName,
      callToolName: mcp.callToolName,
      callTimeoutMs: mcp.callTimeoutMs,
      pageSize: mcp.pageSize,
      queryLimit: mcp.queryLimit,
      maxQueryLength: config.search.maxQueryLength,
      separator: config.catalog.separator,
    },
    log.child({ component: 'mcp' }),
    startup,
  );
  gateway.feedback = deps.feedback;
  const http = mcpHttpFace(gateway, { sessionIdleMs: mcp.sessionIdleMs, maxSessions: mcp.maxSessions, maxSessionsPerKey: mcp.maxSessionsPerKey, unusedSessionIdleMs: mcp.unusedSessionIdleMs, loopbackOnly: deps.loopbackOnly, log });
  const recordUpstreamStatus = (status: UpstreamStatus) => {
    if (deps.metrics) recordUpstream(deps.metrics, status);
  };
  for (const status of upstreams.status()) recordUpstreamStatus(status);
  upstreams.on('status', recordUpstreamStatus);
  upstreams.start();
  return {
    upstreams,
    gateway,
    http,
    routers: [http.router, mcpRestRoutes(gateway, upstreams), oauthRoutes(oauth, connectAuthorized)],
    close: async () => {
      // Clients first (their sessions end), then the upstream connections they were using.
      await http.close();
      gateway.close();
      startup.close();
      await upstreams.close();
    },
  };
}

function recordUpstream({ upstreamConnected, upstreamTools, upstreamFailures }: Metrics, status: UpstreamStatus): void {
  upstreamConnected.set({ server: status.name, transport: status.transport }, status.state === 'connected' ? 1 : 0);
  upstreamTools.set({ server: status.name }, status.tools);
  upstreamFailures.set({ server: status.name }, status.failures);
}
