import type { TaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { Router } from 'express';
import type { Logger } from 'pino';
import type { Access } from '../auth/access.js';
import type { Catalog } from '../catalog/catalog.js';
import type { IndexManager } from '../indexing/manager.js';
import { mcpRestRoutes } from './server/rest-routes.js';
import type { Metrics } from '../metrics.js';
import type { SearchService } from '../search/search.js';
import type { SearchStore } from '../state/searches.js';
import type { FeedbackRecorder } from '../feedback/service.js';
import type { SearchConfig } from '../search/settings.js';
import type { RedisBus } from '../redis/bus.js';
import type { SessionStore } from '../state/sessions.js';
import { McpGateway } from './gateway/gateway.js';
import type { GatewayTasksState } from './relay/tasks.js';
import { OAuthManager } from './upstream/oauth/manager.js';
import { oauthRoutes, type ConnectAuth } from './upstream/oauth/routes.js';
import { mcpHttpFace, type McpHttpFace } from './server/http.js';
import { StartupGate } from './gateway/startup.js';
import type { McpSettings } from './settings.js';
import { McpTokenAccounting } from './gateway/token-accounting.js';
import { UpstreamManager, type UpstreamServerConfig, type UpstreamStatus } from './upstream/index.js';
import { importClientConfigs, type ImportedServers } from './upstream/client-config.js';
import { LocalRuntimeServers, RedisRuntimeServers, type RuntimeServerStore } from './upstream/runtime-servers.js';
import { mcpServerRoutes } from './server/server-routes.js';
import { Sandbox } from '../codemode/sandbox.js';
import { CodeTool } from './gateway/code-tool.js';

/** The configuration slices the MCP gateway reads, handed in by the assembly (src/server.ts). */
export interface McpConfig {
  mcp: McpSettings;
  catalog: { separator: string };
  search: Pick<SearchConfig, 'activation' | 'maxQueryLength'>;
}

export interface McpFaces {
  upstreams: UpstreamManager;
  /** Servers added at run time (PUT /v1/mcp/servers/:name); `start()` loads the stored ones. */
  runtime: RuntimeServerStore;
  /** What mcp.import / --mcp-config gave: the servers taken and the entries left out with the reason. */
  imported: ImportedServers;
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
  feedback?: FeedbackRecorder;
  /** For the start-up wait: the first searches wait (bounded) for the index to include the upstreams' tools. */
  indexes?: IndexManager;
  /** The router's metrics (upstream status gauges); without it nothing is counted. */
  metrics?: Metrics;
  /**
   * With Redis: servers added at run time and OAuth grants of upstream servers are shared by every instance. Without
   * it they live in this process and in `stateDir`.
   */
  bus?: RedisBus;
  /** Where 2025-era /mcp sessions are kept: shared (Redis) lets any instance serve any session. Unset: this process. */
  sessionStore?: SessionStore;
  /** Background tasks' queued messages, shared with the session store (src/state/redis/task-messages.ts). */
  taskMessages?: TaskMessageQueue;
  stateDir?: string;
  /** Counts a request against the caller's key limit (Auth.countRequest); code mode counts each call its code makes. */
  countRequest?: (access: Access) => Promise<void>;
  /** Where search ids and recent-search histories live (src/state/searches.ts); default: this process's memory. */
  searches?: SearchStore;
  /** Where tasks and rounds are kept and how instances reach each other (Redis when scaled out); absent: this process. */
  tasksState?: GatewayTasksState;
  /** For the OAuth connect page (routes.ts): the browser shows the credential that started an authorization. */
  auth: ConnectAuth;
}): McpFaces {
  const { config, catalog, search, log } = deps;
  const mcp = config.mcp;
  const servers = enabledServers(mcp.servers, log);
  // The files were named by the operator: one that cannot be read stops start-up (ClientConfigError); entries that
  // cannot be used are reported by name and the rest load.
  const imported = importClientConfigs(mcp.import, process.env, Object.keys(mcp.servers));
  reportImport(imported, log);
  // OAuth for HTTP servers with `auth: oauth`, wherever they were configured (file, client config, run time).
  const oauth = new OAuthManager({ servers: { ...imported.servers, ...servers }, settings: mcp.oauth, bus: deps.bus, stateDir: deps.stateDir, log });
  const upstreams = new UpstreamManager(catalog, {
    servers,
    imported: imported.servers,
    separator: config.catalog.separator,
    reconnect: mcp.reconnect,
    connectTimeoutMs: mcp.connectTimeoutMs,
    pingIntervalMs: mcp.pingIntervalMs,
    maxResultBytes: mcp.maxResultBytes,
    transforms: mcp.transforms,
    auth: (server) => oauth.auth(server),
    users: oauth,
    userConnections: { max: mcp.oauth.maxUserConnections, idleMs: mcp.oauth.userConnectionIdleMs },
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
      tasks: { maxPerOwner: mcp.tasks.maxPerSession, maxTotal: mcp.tasks.maxTotal, defaultTtlMs: mcp.tasks.defaultTtlMs, maxTtlMs: mcp.tasks.maxTtlMs, maxPendingWrites: mcp.tasks.maxPendingWrites },
    },
    log.child({ component: 'mcp' }),
    startup,
    deps.tasksState,
  );
  gateway.feedback = deps.feedback;
  if (deps.searches) gateway.useSearchStore(deps.searches);
  if (deps.metrics) gateway.tokens = new McpTokenAccounting(deps.metrics);
  // Always present: a key may turn code mode on where mcp.codeMode is off. Its threads start on the first execution.
  const sandbox = new Sandbox(mcp.sandbox);
  gateway.codeMode = new CodeTool(gateway, { enabled: mcp.codeMode, toolName: mcp.executeToolName, sandbox, ...(deps.countRequest ? { countRequest: deps.countRequest } : {}), ...(deps.metrics ? { metrics: deps.metrics } : {}) });
  if (mcp.codeMode) sandbox.warm();
  const http = mcpHttpFace(gateway, { sessionIdleMs: mcp.sessionIdleMs, maxSessions: mcp.maxSessions, maxSessionsPerKey: mcp.maxSessionsPerKey, unusedSessionIdleMs: mcp.unusedSessionIdleMs, maxStreamsPerKey: mcp.maxStreamsPerKey, maxStreams: mcp.maxStreams, sessionStore: deps.sessionStore, taskMessages: deps.taskMessages, metrics: deps.metrics, log });
  const recordUpstreamStatus = (status: UpstreamStatus) => {
    if (deps.metrics) recordUpstream(deps.metrics, status);
  };
  for (const status of upstreams.status()) recordUpstreamStatus(status);
  upstreams.on('status', recordUpstreamStatus);
  upstreams.start();
  const target = {
    put: (name: string, server: UpstreamServerConfig) => {
      // The OAuth side first: the connection asks for it once, when it is created.
      if ('url' in server && server.auth !== undefined) oauth.add(name, { url: server.url, auth: server.auth });
      else oauth.remove(name);
      return upstreams.put(name, server);
    },
    remove: (name: string) => {
      const removed = upstreams.remove(name);
      oauth.remove(name);
      return removed;
    },
  };
  const runtime: RuntimeServerStore = deps.bus
    ? new RedisRuntimeServers(target, deps.bus, log.child({ component: 'upstreams' }))
    : new LocalRuntimeServers(target, deps.stateDir, log.child({ component: 'upstreams' }));
  return {
    runtime,
    upstreams,
    imported,
    gateway,
    http,
    routers: [http.router, mcpRestRoutes(gateway, upstreams, imported.skipped), mcpServerRoutes({ upstreams, catalog, store: runtime, runtimeStdio: mcp.runtimeStdio }), oauthRoutes(oauth, deps.auth, connectAuthorized, (server, subject) => void upstreams.dropUser(server, subject))],
    close: async () => {
      // Clients first (their sessions end), then the upstream connections they were using.
      await http.close();
      gateway.close();
      // Task ends kept while Redis was away (and the shutdown's own "failed" for tasks still running): a last chance.
      if (!(await gateway.tasks.pending.flushed(2_000))) log.warn({ pending: gateway.tasks.pending.size }, 'task results not written before shutdown (Redis unavailable); those tasks will read failed');
      startup.close();
      await upstreams.close();
      await sandbox.close();
    },
  };
}

function recordUpstream({ upstreamConnected, upstreamTools, upstreamFailures }: Metrics, status: UpstreamStatus): void {
  upstreamConnected.set({ server: status.name, transport: status.transport }, status.state === 'connected' ? 1 : 0);
  upstreamTools.set({ server: status.name }, status.tools);
  upstreamFailures.set({ server: status.name }, status.failures);
}

/** mcp.servers without the entries marked `disabled: true`. */
function enabledServers(servers: McpSettings['servers'], log: Logger): Record<string, UpstreamServerConfig> {
  const enabled: Record<string, UpstreamServerConfig> = {};
  for (const [name, { disabled, ...server }] of Object.entries(servers)) {
    if (disabled) log.info({ upstream: name }, 'upstream MCP server disabled (disabled: true); not connected');
    else enabled[name] = server;
  }
  return enabled;
}

function reportImport(imported: ImportedServers, log: Logger): void {
  for (const { file, server, reason, disabled } of imported.skipped) {
    if (disabled) log.info({ file, upstream: server }, `MCP server "${server}" in ${file} is disabled; not connected`);
    else log.warn({ file, upstream: server, reason }, `MCP server "${server}" in ${file} left out: ${reason}`);
  }
  const names = Object.keys(imported.servers);
  if (names.length > 0) log.info({ servers: names }, 'MCP servers imported from client config files');
}
