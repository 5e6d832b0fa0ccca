/** The MCP gateway's settings (YAML `mcp`): schema and defaults. Assembled by `src/config/`. */
import { z } from 'zod';
import { sandboxSettingsSchema } from '../codemode/settings.js';
import { oauthSettingsSchema, upstreamOAuthSchema } from './upstream/oauth/settings.js';
import { toolTransformSchema } from './upstream/transform.js';

/** Names clients use for the transport (`type` in Claude Code and VS Code, `transport` in LiteLLM and others). */
const TRANSPORT_NAMES: Record<string, 'stdio' | 'http' | 'sse'> = {
  stdio: 'stdio',
  http: 'http',
  'streamable-http': 'http',
  streamable_http: 'http',
  streamableHttp: 'http',
  sse: 'sse',
};

/**
 * `transport` is read as `type`, and the client spellings of streamable HTTP as `http`, so an entry copied from a client
 * config loads as it is. Anything else is left for the schema to name.
 */
function normalizeTransportKey(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const { transport, ...rest } = value as Record<string, unknown>;
  const entry: Record<string, unknown> = transport === undefined || 'type' in rest ? { ...value } : { ...rest, type: transport };
  if (typeof entry.type === 'string' && TRANSPORT_NAMES[entry.type] !== undefined) entry.type = TRANSPORT_NAMES[entry.type];
  return entry;
}

const stdioServerSchema = z
  .object({
    type: z.literal('stdio').optional(),
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    /** Added to a minimal inherited environment (PATH, HOME, ...), not to toolrouter's whole environment. */
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().optional(),
    /** What the server is for (indexed with its tools, named in search_tools); default: what the server says of itself. */
    description: z.string().max(2_000).optional(),
    /** true: known but not connected (as in client configs). */
    disabled: z.boolean().optional(),
  })
  .strict();

const httpServerSchema = z
  .object({
    type: z.enum(['http', 'sse']).optional(),
    url: z.string().url(),
    headers: z.record(z.string(), z.string()).default({}),
    /** OAuth 2.1 per the MCP authorization spec (src/mcp/upstream/oauth/): `oauth`, or {type: oauth, grant?, clientId?, ...}. */
    auth: upstreamOAuthSchema.optional(),
    /**
     * Headers a client may send for this server with a request, as `x-toolrouter-upstream-<server>-<header>`
     * (e.g. `authorization`): added to that request's calls only, never stored or logged.
     */
    passthroughHeaders: z.array(z.string().regex(/^[A-Za-z0-9-]{1,64}$/, 'a header name')).max(16).optional(),
    description: z.string().max(2_000).optional(),
    disabled: z.boolean().optional(),
  })
  .strict()
  // An OAuth server's Authorization header carries its grant (the shared one or, perUser, the caller's): a per-request
  // one would silently replace it, and the upstream's 401 for it would read as the grant failing (a refresh spent, a
  // per-user caller sent to authorize again). Other headers pass through on top of the grant.
  .refine((server) => server.auth === undefined || !server.passthroughHeaders?.some((name) => name.toLowerCase() === 'authorization'), {
    message: 'cannot pass "authorization" through to a server with auth: oauth (its Authorization header carries the OAuth grant); pass other headers, or drop auth to let callers bring their own token',
    path: ['passthroughHeaders'],
  });

/** An upstream MCP server: a command to spawn (stdio), a streamable HTTP endpoint, or a legacy HTTP+SSE one. */
/**
 * The in-process task store: tasks one session may hold (running or finished, until they expire), tasks held in all,
 * and how long a task and its result are kept (the client's ttl, else the default; never more than the maximum).
 */
export const tasksSettingsSchema = z
  .object({
    maxPerSession: z.number().int().min(1).max(10_000).default(100),
    maxTotal: z.number().int().min(1).max(1_000_000).default(10_000),
    defaultTtlMs: z.number().int().min(1_000).max(86_400_000).default(600_000),
    maxTtlMs: z.number().int().min(1_000).max(86_400_000).default(3_600_000),
    /**
     * Task status and result writes this instance keeps while Redis does not take them (restarting, failing over, out
     * of memory), written in order when it does; beyond this the oldest status changes are dropped first.
     */
    maxPendingWrites: z.number().int().min(1).max(1_000_000).default(10_000),
  })
  .strict()
  .prefault({});

export type TasksSettings = z.infer<typeof tasksSettingsSchema>;

export const mcpServerSchema = z.preprocess(
  normalizeTransportKey,
  z.union(
    [stdioServerSchema, httpServerSchema],
    { error: (issue) => serverEntryProblem(issue.input, (issue as { errors?: z.core.$ZodIssue[][] }).errors ?? []) },
  ),
);

const SERVER_SHAPE =
  'an MCP server is {command, args?, env?, cwd?} (stdio) or {url, headers?, auth?} (streamable HTTP; type: "sse" for the legacy SSE transport); type / transport: stdio, http or sse';
const STDIO_KEYS = Object.keys(stdioServerSchema.shape);
const HTTP_KEYS = Object.keys(httpServerSchema.shape);

/**
 * Why an entry fits neither form, naming the key at fault: a misspelled key (`comand`) or transport (`"type": "htp"`)
 * gets its name and the nearest right one, an entry of one form gets that form's own problems; only an entry that is
 * not an object gets the general shape alone.
 */
function serverEntryProblem(input: unknown, branches: z.core.$ZodIssue[][]): string {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return SERVER_SHAPE;
  const entry = input as Record<string, unknown>;
  if (entry.type !== undefined && !['stdio', 'http', 'sse'].includes(entry.type as string)) {
    const names = Object.keys(TRANSPORT_NAMES);
    return `type: ${JSON.stringify(entry.type)} is not a transport (stdio, http or sse)${suggestion(String(entry.type), names, (name) => TRANSPORT_NAMES[name]!)}`;
  }
  const stdio = 'command' in entry || entry.type === 'stdio';
  const http = 'url' in entry || entry.type === 'http' || entry.type === 'sse';
  const known = stdio && !http ? STDIO_KEYS : http && !stdio ? HTTP_KEYS : [...new Set([...STDIO_KEYS, ...HTTP_KEYS])];
  const unknown = Object.keys(entry).filter((key) => !known.includes(key));
  if (unknown.length > 0) {
    const named = unknown.map((key) => `${JSON.stringify(key)}${suggestion(key, known)}`).join(', ');
    return `unknown key${unknown.length > 1 ? 's' : ''} ${named}${stdio || http ? ` for a ${stdio ? 'stdio' : 'HTTP'} server` : `; ${SERVER_SHAPE}`}`;
  }
  if (stdio === http) return stdio ? 'set either "command" (stdio) or "url" (HTTP), not both' : `neither "command" (stdio) nor "url" (HTTP) is set; ${SERVER_SHAPE}`;
  const issues = branches[stdio ? 0 : 1] ?? [];
  if (issues.length === 0) return SERVER_SHAPE;
  return issues.map((issue) => (issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message)).join('; ');
}

/** ` (did you mean "x"?)` for the closest name within two edits, else nothing. */
function suggestion(word: string, names: readonly string[], shown: (name: string) => string = (name) => name): string {
  let best: { name: string; distance: number } | undefined;
  for (const name of names) {
    const distance = editDistance(word.toLowerCase(), name.toLowerCase());
    if (distance <= 2 && (!best || distance < best.distance)) best = { name, distance };
  }
  return best ? ` (did you mean ${JSON.stringify(shown(best.name))}?)` : '';
}

function editDistance(a: string, b: string): number {
  // Keys are short; the bound keeps a long hostile key from costing more than a short one.
  if (Math.abs(a.length - b.length) > 2 || a.length > 64) return Infinity;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

export type McpServerSettings = z.infer<typeof mcpServerSchema>;

export const SERVER_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
export const SERVER_NAME_MESSAGE = 'server names are 1-64 characters of A-Z a-z 0-9 _ - .';

/** MCP gateway: upstream servers and the face served at /mcp and by `toolrouter stdio`. */
export const mcpSettingsSchema = z
  .object({
    /** Upstream MCP servers by name; the name prefixes their tools (`name` + catalog.separator + tool). */
    servers: z.record(z.string().regex(SERVER_NAME, SERVER_NAME_MESSAGE), mcpServerSchema).default({}),
    /**
     * MCP client config files to take servers from, as their clients write them: Claude Desktop, Claude Code
     * (`.mcp.json`), Cursor (`mcpServers`), VS Code (`.vscode/mcp.json`, `servers`). `toolrouter serve|stdio
     * --mcp-config FILE` adds to this list. Relative paths are read from the working directory.
     */
    import: z.array(z.string().min(1)).default([]),
    /** Servers added with PUT /v1/mcp/servers/:name may be stdio commands (code execution on this host). */
    runtimeStdio: z.boolean().default(false),
    /**
     * true: tools/list shows pinned tools + the two virtual tools; false: a plain aggregator listing everything;
     * "auto": the aggregator while the tools fit search.activation, search beyond it (clients get list_changed).
     */
    search: z.union([z.literal('auto'), z.boolean()], { error: 'must be "auto", true or false' }).default('auto'),
    searchToolName: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/).default('search_tools'),
    callToolName: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/).default('call_tool'),
    /**
     * The largest message toolrouter reads from an upstream (a tool result, a resource, a prompt). A larger result is
     * refused unread with an isError result naming this setting, so one upstream cannot take the process's memory: each
     * message is held whole only up to this size (per call in flight). Default 4 MiB: about a million tokens of text,
     * more than any model's context holds, and a 3 MB image base64-encoded still fits.
     */
    maxResultBytes: z.number().int().min(1_024).max(1_073_741_824).default(4 * 1024 * 1024),
    /**
     * Code mode: tools/list offers `execute` (executeToolName), which runs a JavaScript program calling tools in a
     * sandbox (src/codemode/). A key's `code_mode_enabled` overrides this for that key.
     */
    codeMode: z.boolean().default(false),
    executeToolName: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/).default('execute'),
    /** Code mode's limits per execution and executions at once (src/codemode/settings.ts). */
    sandbox: sandboxSettingsSchema,
    /** A forwarded call that takes longer fails with a timeout (and the upstream is told to cancel it). */
    callTimeoutMs: z.number().int().min(1).max(3_600_000).default(60_000),
    /** Tasks clients ask for with a task-augmented tools/call (MCP 2025-11-25; src/mcp/relay/tasks.ts). */
    tasks: tasksSettingsSchema,
    /**
     * A session's first tools/list and search_tools wait at most this long after start for every upstream's first
     * connection attempt (and the index of their tools); answers given before say which servers are missing.
     */
    startupWaitMs: z.number().int().min(0).max(600_000).default(10_000),
    /** Connecting and listing tools; an upstream slower than this counts as down. */
    connectTimeoutMs: z.number().int().min(1).max(600_000).default(30_000),
    /** Liveness ping for connected upstreams; an HTTP upstream that vanished is only noticed this way. 0: off. */
    pingIntervalMs: z.number().int().min(0).default(15_000),
    reconnect: z
      .object({ initialMs: z.number().int().min(1).default(500), maxMs: z.number().int().min(1).default(30_000) })
      .prefault({}),
    /** tools/list page size (with a query or in aggregator mode). */
    pageSize: z.number().int().min(1).max(10_000).default(100),
    /** Most tools a SEP-1821 query (`tools/list` with `params.query`) returns over all pages. */
    queryLimit: z.number().int().min(1).max(1_000).default(10),
    /** Idle /mcp sessions are closed after this long. */
    sessionIdleMs: z.number().int().min(1_000).default(30 * 60_000),
    maxSessions: z.number().int().min(1).default(1_000),
    /** Sessions one key (open service: one client address) may hold at once; beyond it initialize answers 429. */
    maxSessionsPerKey: z.number().int().min(1).default(100),
    /** A session that made no request after initialize is closed after this long (floods of bare sessions). */
    unusedSessionIdleMs: z.number().int().min(100).default(30_000),
    /**
     * Long-lived streams (2026-07-28 subscriptions/listen, 2025 GET event streams) one key (open service: one client
     * address) may hold open at once, and all callers but the admin together; beyond either the stream is refused (429).
     */
    maxStreamsPerKey: z.number().int().min(1).default(100),
    maxStreams: z.number().int().min(1).default(1_000),
    /** Tool transformation: qualified upstream tool name → new name, description, arguments... (src/mcp/upstream/transform.ts). */
    transforms: z.record(z.string().min(1), toolTransformSchema).default({}),
    /** OAuth to upstream servers with `auth: oauth` (src/mcp/upstream/oauth/): token encryption, callback URL, refresh lock. */
    oauth: oauthSettingsSchema,
  })
  .prefault({})
  .refine((mcp) => mcp.searchToolName !== mcp.callToolName, 'mcp.searchToolName and mcp.callToolName must differ')
  .refine(
    (mcp) => mcp.executeToolName !== mcp.searchToolName && mcp.executeToolName !== mcp.callToolName,
    'mcp.executeToolName must differ from mcp.searchToolName and mcp.callToolName',
  );

export type McpSettings = z.infer<typeof mcpSettingsSchema>;
