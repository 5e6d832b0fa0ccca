/** The shapes shared by the upstream connection's parts: server configs, status, call options, errors. */
import { ToolrouterError, type ErrorCode } from '../../errors.js';
import type { Logger } from 'pino';
import type { ToolTransform } from './transform.js';
import type { RelayContext } from '../relay/channel.js';
import type { UpstreamOAuthSettings } from './oauth/settings.js';
import type { AuthorizationNeeded, UpstreamAuth, UserGrants } from './oauth/types.js';

/** A spawned process speaking MCP on stdin/stdout. */
export interface StdioServerConfig {
  type?: 'stdio';
  command: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** What the server is for (indexed with its tools); default: what the server says of itself. */
  description?: string;
}

/** A remote server: streamable HTTP (`http`, the default) or the legacy HTTP+SSE transport (`sse`). */
export interface RemoteServerConfig {
  type?: 'http' | 'sse';
  url: string;
  headers?: Record<string, string>;
  description?: string;
  /** OAuth 2.1 (src/mcp/upstream/oauth/); the connection gets it through UpstreamManagerOptions.auth. */
  auth?: UpstreamOAuthSettings;
  /** Header names a request may carry for this server (`x-toolrouter-upstream-<server>-<header>`), for its calls only. */
  passthroughHeaders?: string[];
}

/** An upstream MCP server: a command spawned with stdio, or an HTTP endpoint. */
export type UpstreamServerConfig = StdioServerConfig | RemoteServerConfig;

export type UpstreamTransportKind = 'stdio' | 'http' | 'sse';

export function transportKind(config: UpstreamServerConfig): UpstreamTransportKind {
  if ('url' in config) return config.type === 'sse' ? 'sse' : 'http';
  return 'stdio';
}

/** Where a server's configuration came from: the config file, an imported client config, or the admin API. */
export type UpstreamOrigin = 'config' | 'import' | 'runtime';

export interface UpstreamManagerOptions {
  servers: Record<string, UpstreamServerConfig>;
  /** Servers read from MCP client config files (mcp.import, --mcp-config); default: none. */
  imported?: Record<string, UpstreamServerConfig>;
  /** Between server and tool name; '' turns namespacing off (then equal names across servers clash). */
  separator: string;
  reconnect: { initialMs: number; maxMs: number };
  /** Connecting (initialize) and each tools/list page. */
  connectTimeoutMs: number;
  /** 0 turns the liveness ping off. */
  pingIntervalMs: number;
  /** Tool transformations by qualified upstream tool name (mcp.transforms); none when absent. */
  transforms?: Record<string, ToolTransform>;
  /** Largest message read from an upstream (mcp.maxResultBytes); default DEFAULT_MAX_RESULT_BYTES. */
  maxResultBytes?: number;
  /** OAuth for HTTP servers with `auth: oauth` (src/mcp/upstream/oauth/), asked for when a server's connection is created. */
  auth?: (server: string) => UpstreamAuth | undefined;
  /** Per-user OAuth servers' grants (src/mcp/upstream/oauth/): calls with a subject go out on that subject's own connection. */
  users?: UserGrants;
  /** Bounds of those per-user connections (mcp.oauth.maxUserConnections, userConnectionIdleMs). */
  userConnections?: { max: number; idleMs: number };
  log: Logger;
}

/** needs_authorization: an OAuth server without a usable grant; an admin authorizes it (POST .../authorize). */
export type UpstreamState = 'connecting' | 'connected' | 'down' | 'needs_authorization' | 'closed';

export interface UpstreamStatus {
  name: string;
  transport: UpstreamTransportKind;
  /** config: mcp.servers; import: an MCP client config file; runtime: added with PUT /v1/mcp/servers/:name. */
  origin: UpstreamOrigin;
  state: UpstreamState;
  /** Tools of this server in the catalog now. */
  tools: number;
  /** While connected: the protocol revision negotiated (the newest both sides speak, e.g. 2026-07-28 or 2025-11-25). */
  revision?: string;
  /**
   * While the server is not connected: its tools as last listed, kept so that calls to them answer
   * upstream_unavailable naming this server (they are out of the catalog, listings and search until it is back).
   */
  knownTools?: number;
  /** While down: when the next connection attempt is due (ISO time). */
  retryAt?: string;
  connectedAt: string | null;
  /** Consecutive failed connection attempts. */
  failures: number;
  /** 'oauth' for a server with `auth: oauth` (the console offers Connect: POST /v1/mcp/servers/:name/authorize). */
  auth?: 'oauth';
  /** While needs_authorization: why (never_connected, refresh_failed, revoked) and what to do. */
  authorization?: AuthorizationNeeded;
  lastError?: string;
  /** Qualified names another source already owns; these tools of this server are left out. */
  clashes: string[];
  /** Tools the server lists that are not valid MCP tools (bad name, bad schema), left out with the reason. */
  skipped: string[];
  /**
   * Configured transforms that do not fit what the server lists: a tool it does not have (nothing is transformed), or
   * an argument the tool does not have / a rename onto one it has (that tool is left out rather than served untransformed).
   */
  transformProblems: string[];
}

export type UpstreamErrorCode = Extract<ErrorCode, 'upstream_timeout' | 'upstream_unavailable' | 'upstream_error'>;

/** A forwarded call that did not produce a result: timed out, no connection, or the upstream answered with an error. */
export class UpstreamError extends ToolrouterError {
  override readonly name = 'UpstreamError';
  declare readonly code: UpstreamErrorCode;
  constructor(
    code: UpstreamErrorCode,
    message: string,
    /** For upstream_unavailable: seconds until the server's next connection attempt (REST Retry-After). */
    retryAfterSeconds?: number,
    /** The server concerned, when known: callers other than the admin are told only its name (gateway.ts). */
    readonly server?: string,
  ) {
    super(code, message, retryAfterSeconds === undefined ? {} : { retryAfterSeconds });
  }
}

/** A progress notification from the upstream, for relaying to whoever asked with a progress token. */
export interface UpstreamProgress {
  progress: number;
  total?: number;
  message?: string;
}

export interface UpstreamCallOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  /** Asks the upstream for progress notifications (a progress token of our own) and receives them. */
  onProgress?: (progress: UpstreamProgress) => void;
  /** Sent as the request's `_meta` (the trace context, src/telemetry/spans.ts mcpClientToolSpan). */
  meta?: Record<string, string>;
  /** The caller's client channel: what the upstream asks during the call reaches it (src/mcp/relay/). */
  relay?: RelayContext;
  /** The calling key's id, when a key calls: a per-user authorization it starts is bound to it (oauth/binding.ts). */
  keyId?: string;
  /** Whose grant a server with per-user OAuth uses (Access.subject); undefined: the server's shared grant. */
  subject?: string;
  /**
   * The caller runs this call as a task (a task-augmented tools/call to toolrouter): a tool the upstream can run as a
   * task (taskSupport "optional", tasks for tools/call declared) is run as one there too (calls.ts runsAsTask).
   */
  asTask?: boolean;
}

/** Resources or prompts a server offers changed (it connected, went down, or re-listed), or a subscribed resource did. */
export type FeaturesChange = { kind: 'lists' } | { kind: 'resourceUpdated'; uri: string };

export interface UpstreamEvents {
  /** A server's state or its tools in the catalog changed. */
  status: [UpstreamStatus];
  /** What a server offers besides tools changed; `server` names it. */
  features: [server: string, change: FeaturesChange];
  /** A server was added or removed at run time. */
  servers: [];
}

export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    promise.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}
