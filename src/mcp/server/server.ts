import type { TaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import { InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { Protocol } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { createHash, randomUUID } from 'node:crypto';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type CallToolResult,
  type CreateTaskResult,
  type LoggingLevel,
  type ServerCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import { Access } from '../../auth/access.js';
import { compileSchema } from '../../catalog/json-schema.js';
import type { Tool } from '../../catalog/types.js';
import { briefTool } from '../../search/coverage.js';
import { SELECT_PREFIX } from '../../search/search.js';
import { RpcError, withBareError } from './rpc-error.js';
import { isSharedStateUnavailable, retryableTaskStore, sharedStateError } from './unavailable.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { guardParams, loose, parseParams } from './params.js';
import { URL_ELICITATION_REQUIRED, UrlElicitationRequiredError } from '../upstream/oauth/elicitation.js';
import { GatewayError, type McpGateway } from '../gateway/gateway.js';
import type { UpstreamNotes } from '../gateway/startup.js';
import type { FeaturesChange, UpstreamProgress } from '../upstream/index.js';
import { IMPLEMENTATION } from '../version.js';
import { McpFeedback, SEARCH_ID_META } from '../gateway/feedback-capture.js';
import { mcpServerToolSpan } from '../../telemetry/spans.js';
import type { RelayContext } from '../relay/channel.js';
import { SessionRelay } from '../relay/session.js';
import { CodeTool, searchDetail } from '../gateway/code-tool.js';
import { ownerOf, TaskLimitError } from '../relay/tasks.js';

/**
 * tools/list as SEP-1821 extends it: `params.query` filters the catalog. The SDK's own schema would strip the unknown
 * `query` before the handler sees it, so this one keeps every param and the handler checks them.
 */
const ListToolsWithQuerySchema = z.object({
  method: z.literal('tools/list'),
  params: z.looseObject({ cursor: z.unknown().optional(), query: z.unknown().optional() }).optional(),
});

/**
 * Capabilities: tools with list_changed notifications, and SEP-1821 `filtering`. The SDK's types do not know
 * `filtering` yet; the server sends capabilities as given, so it reaches clients. Resources and prompts of the upstreams
 * are aggregated; subscriptions are relayed to upstreams that take them (others answer with an error).
 */
export const CAPABILITIES = {
  tools: { listChanged: true, filtering: true },
  resources: { listChanged: true, subscribe: true },
  prompts: { listChanged: true },
  // Upstreams' log messages during a session's calls, at the level it set (src/mcp/relay/session.ts).
  logging: {},
  // completion/complete for the aggregated prompts and resource templates, answered by the server offering them.
  completions: {},
  // A task-augmented tools/call runs in the background; the session polls it (src/mcp/relay/tasks.ts).
  tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
} as ServerCapabilities;

/** Messages (relayed requests, log messages) one background task may have waiting for the client's tasks/result. */
const TASK_QUEUE_SIZE = 100;

/** JSON-RPC code for a resource that no allowed server serves (the code the MCP specification gives it). */
const RESOURCE_NOT_FOUND = -32002;
/** One session cannot make the gateway hold (and upstreams keep) unbounded subscriptions. */
const MAX_SUBSCRIPTIONS = 100;

/**
 * JSON-RPC error code for a tool the caller's key may not use: the MCP form of HTTP 403 (an implementation-defined
 * server error code, so clients can tell it from a malformed request). `data.status` says 403 for HTTP-minded clients.
 */
export const ACCESS_DENIED = -32003;

/**
 * The 1.x SDK Server, sending every error's message bare. The SDK's McpError carries "MCP error <code>: " in its
 * message and the SDK sends that message as it is, and the receiving client adds the prefix again: its own handlers'
 * errors (tasks/get of an unknown task) read "MCP error -32602: MCP error -32602: …". Here, where every message of a
 * connection leaves, is the one place that covers them all, the SDK's and toolrouter's alike.
 */
class BareErrorServer extends Server {
  override async connect(transport: Transport): Promise<void> {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => send(withBareError(message), options);
    await super.connect(transport);
  }
}

/**
 * What an /mcp session keeps where other instances read it (src/mcp/server/http.ts, src/state/sessions.ts): the level
 * and subscriptions it sets are handed out here before the answer goes back; a level it set on another instance comes
 * in through `applyLevel`. Unset (stdio, a session store of one process): nothing leaves the server.
 */
export interface McpSessionState {
  onLevel?(level: LoggingLevel): Promise<void>;
  /** A URI subscribed (`add`) or unsubscribed (`remove`) on this instance. */
  onSubscription?(change: { add?: string; remove?: string }): Promise<void>;
  /** Set by createMcpServer: applies the level the session last set, wherever it set it. */
  applyLevel?: (level: LoggingLevel | undefined) => void;
  /**
   * true when closing this server does not end the session: another instance (or this one, later) may serve it again
   * from the shared store, so its tasks must stay readable; they end by their own TTL instead.
   */
  outlivesClose?: boolean;
  /**
   * Where a background task's queued messages (what its upstream asks or logs) wait for tasks/result: shared by every
   * instance when sessions are (src/state/redis/task-messages.ts). @defaultValue this connection's own queue
   */
  taskMessages?: TaskMessageQueue;
}

/**
 * One MCP server over the gateway for one 2025-era client connection (an /mcp session or the stdio pipe), on the 1.x
 * SDK: the SDK Server holds per-connection protocol state, so each connection gets its own, all sharing the gateway.
 * The 2026-07-28 face (modern.ts) reuses the request handlers below (listTools, callTool, rpc), so both revisions
 * answer alike.
 *
 * Error style (MCP 2025-11-25, SEP-1303): a JSON-RPC error only when the request cannot be routed: a malformed
 * request, an unknown top-level tool name, a bad cursor or query. Everything that fails once a tool is known (invalid
 * arguments, recursion through call_tool, an unknown tool named inside call_tool, upstream timeout, upstream down or
 * failing) is a tool result with `isError: true` and a message saying what to fix, which the model can read and act on.
 */
export function createMcpServer(gateway: McpGateway, log: Logger, caller: Access | (() => Access) = Access.open, state?: McpSessionState): Server {
  // A function when the caller's key may change under a live session (/key/update): each request sees it as it is now.
  const accessNow = typeof caller === 'function' ? caller : () => caller;
  // This connection's tasks: bound to the caller (its key or subject) and to this connection, so neither another key
  // nor another session of the same key can see them. The SDK answers tasks/get, result, list and cancel from the store.
  // The session is the transport's Mcp-Session-Id (which any instance may serve), else this connection (stdio).
  const connection = randomUUID();
  const taskOwner = (sessionId: string | undefined) => `${ownerOf(accessNow())} ${sessionId ?? connection}`;
  // The session this connection served tasks for (the transport is gone by the time the connection's close runs).
  let taskSession: string | undefined;
  // A Redis outage reads as a retryable JSON-RPC error (unavailable.ts), never as Redis's text in a -32603.
  const taskStore = retryableTaskStore(gateway.tasks.storeFor(taskOwner));
  const server = new BareErrorServer(IMPLEMENTATION, {
    capabilities: CAPABILITIES,
    instructions: instructions(gateway, accessNow()),
    taskStore,
    // What a background task's upstream asks or logs waits here for the client's tasks/result, which delivers it
    // (MCP 2025-11-25 tasks, input_required): one queue per session, bounded per task.
    taskMessageQueue: state?.taskMessages ?? new InMemoryTaskMessageQueue(),
    maxTaskQueueSize: TASK_QUEUE_SIZE,
  });
  // A session's own searches are filed under its id, so whichever instance serves its next request finds them; a
  // connection without one (stdio) files them under `connection`.
  const feedback = new McpFeedback(gateway.searches, () => accessNow().scope, () => server.transport?.sessionId ?? connection);

  server.setRequestHandler(ListToolsWithQuerySchema, async (request) => {
    return listTools(gateway, request.params, accessNow(), feedback);
  });

  // This connection's client, as the relay sees it: one id per session, so a relayed request never reaches another one.
  const session = new SessionRelay(server, gateway.settings.callTimeoutMs);
  // Past the 1.x Server's own tools/call wrapper, which answers a mistake in params with a raw validation dump (and
  // checks task results this gateway does not create): parseParams names field and type.
  Protocol.prototype.setRequestHandler.call(server, loose(CallToolRequestSchema), async (raw, extra): Promise<CallToolResult | CreateTaskResult> => {
    const params = parseParams(CallToolRequestSchema, raw).params;
    if (params.task !== undefined) {
      // Answered at once with the task; the call runs on without this request's stream. What its upstream asks
      // (elicitation, sampling) puts the task in input_required and reaches the client through tasks/result, with the
      // related-task metadata; log messages go the same way. Progress is not sent.
      const access = accessNow();
      taskSession = extra.sessionId;
      const task = await startTask(() =>
        gateway.tasks.start(taskOwner(extra.sessionId), params.task?.ttl, (signal, taskId) => {
          const status = (next: 'working' | 'input_required') => void taskStore.updateTaskStatus(taskId, next).catch(() => {});
          return callTool(gateway, params, { signal, notify: async () => {}, relay: { channel: session.taskChannel(taskId, status) }, asTask: true }, access, feedback, log);
        }),
      );
      return { task };
    }
    return callTool(
      gateway,
      params,
      { signal: extra.signal, progressToken: extra._meta?.progressToken, notify: (n) => extra.sendNotification(n), relay: { channel: session.channel(extra) } },
      accessNow(),
      feedback,
      log,
    );
  });
  server.setRequestHandler(loose(SetLevelRequestSchema), async (raw) => {
    const { level } = parseParams(SetLevelRequestSchema, raw).params;
    await state?.onLevel?.(level);
    session.setLevel(level);
    // Upstreams are told the most verbose level any session wants; this session's channel filters to its own.
    gateway.logLevels.set(session.id, level);
    return {};
  });
  if (state) {
    state.applyLevel = (level) => {
      if (level === undefined || level === session.logLevel) return;
      session.setLevel(level);
      gateway.logLevels.set(session.id, level);
    };
  }

  server.setRequestHandler(loose(ListResourcesRequestSchema), async (raw) =>
    rpc(() => gateway.listResources({ cursor: parseParams(ListResourcesRequestSchema, raw).params?.cursor }, accessNow())),
  );
  server.setRequestHandler(loose(ListResourceTemplatesRequestSchema), async (raw) =>
    rpc(() => gateway.listResourceTemplates({ cursor: parseParams(ListResourceTemplatesRequestSchema, raw).params?.cursor }, accessNow())),
  );
  server.setRequestHandler(loose(ListPromptsRequestSchema), async (raw) =>
    rpc(() => gateway.listPrompts({ cursor: parseParams(ListPromptsRequestSchema, raw).params?.cursor }, accessNow())),
  );
  server.setRequestHandler(loose(ReadResourceRequestSchema), async (raw, extra) =>
    rpc(() => gateway.readResource(parseParams(ReadResourceRequestSchema, raw).params.uri, { signal: extra.signal, access: accessNow() }), RESOURCE_NOT_FOUND),
  );
  server.setRequestHandler(loose(GetPromptRequestSchema), async (raw, extra) => {
    const { name, arguments: args } = parseParams(GetPromptRequestSchema, raw).params;
    return rpc(() => gateway.getPrompt(name, args, { signal: extra.signal, access: accessNow() }));
  });
  server.setRequestHandler(loose(CompleteRequestSchema), async (raw, extra) => {
    const { params } = parseParams(CompleteRequestSchema, raw);
    return rpc(() => gateway.complete(params, { signal: extra.signal, access: accessNow() }));
  });
  // This session's subscriptions: URI → the server subscribed at; undone when the session ends.
  const subscriptions = new Map<string, string>();
  server.setRequestHandler(loose(SubscribeRequestSchema), async (raw) => {
    const { uri } = parseParams(SubscribeRequestSchema, raw).params;
    if (subscriptions.has(uri)) return {};
    if (subscriptions.size >= MAX_SUBSCRIPTIONS) throw new RpcError(ErrorCode.InvalidParams, `at most ${MAX_SUBSCRIPTIONS} resource subscriptions per session`);
    subscriptions.set(uri, await rpc(() => gateway.subscribe(uri, accessNow()), RESOURCE_NOT_FOUND));
    await state?.onSubscription?.({ add: uri });
    return {};
  });
  server.setRequestHandler(loose(UnsubscribeRequestSchema), async (raw) => {
    const { uri } = parseParams(UnsubscribeRequestSchema, raw).params;
    const owner = subscriptions.get(uri);
    subscriptions.delete(uri);
    if (owner !== undefined) await gateway.unsubscribe(uri, owner);
    // Made on another instance perhaps: the stored list forgets it, so that instance stops passing its updates on.
    await state?.onSubscription?.({ remove: uri });
    return {};
  });

  // Resources and prompts: tell this client when what it may see changed, and when a subscribed resource was updated.
  let resourceSignature = featureSignature(gateway, accessNow(), 'resources');
  let promptSignature = featureSignature(gateway, accessNow(), 'prompts');
  const onFeatures = (owner: string, change: FeaturesChange) => {
    if (!server.transport) return;
    const notify = (send: Promise<void>) => void send.catch((error: unknown) => log.debug({ err: error }, 'notification not delivered'));
    if (change.kind === 'resourceUpdated') {
      if (subscriptions.get(change.uri) === owner) notify(server.sendResourceUpdated({ uri: change.uri }));
      return;
    }
    const resources = featureSignature(gateway, accessNow(), 'resources');
    const prompts = featureSignature(gateway, accessNow(), 'prompts');
    if (resources !== resourceSignature) notify(server.sendResourceListChanged());
    if (prompts !== promptSignature) notify(server.sendPromptListChanged());
    resourceSignature = resources;
    promptSignature = prompts;
  };
  gateway.on('featuresChanged', onFeatures);

  // Tell this client when its own tool list changed (a key's list can change while others' do not, and the other way
  // round). Removed when the connection closes.
  let listSignature = gateway.listSignature(accessNow());
  const onListChanged = () => {
    const signature = gateway.listSignature(accessNow());
    if (signature === listSignature) return;
    listSignature = signature;
    if (server.transport) server.sendToolListChanged().catch((error: unknown) => log.debug({ err: error }, 'list_changed not delivered'));
  };
  gateway.on('listChanged', onListChanged);
  const previousOnClose = server.onclose;
  server.onclose = () => {
    if (!state?.outlivesClose) void gateway.tasks.dropOwner(taskOwner(taskSession)).catch((error: unknown) => log.debug({ err: error }, 'tasks of a closed session not dropped; they expire'));
    gateway.logLevels.drop(session.id);
    gateway.off('listChanged', onListChanged);
    gateway.off('featuresChanged', onFeatures);
    for (const [uri, owner] of subscriptions) void gateway.unsubscribe(uri, owner).catch(() => {});
    subscriptions.clear();
    previousOnClose?.();
  };
  // The SDK's own handlers too (initialize, tasks/*): a client's params mistake is -32602 in words (params.ts).
  guardParams(server);
  return server;
}

/** Starts a task; a full store is the client's problem to solve (wait, cancel): a JSON-RPC error saying so. */
export async function startTask<T>(start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    if (error instanceof TaskLimitError) throw new RpcError(ErrorCode.InvalidRequest, error.message);
    if (isSharedStateUnavailable(error)) throw sharedStateError();
    throw error;
  }
}

/** What a tools/call handler needs of its SDK's request context, whichever SDK and revision serves it. */
export interface CallContext {
  signal: AbortSignal;
  progressToken?: string | number;
  notify(notification: { method: 'notifications/progress'; params: Record<string, unknown> }): Promise<void>;
  /** The calling client, for what the upstream asks or tells during the call (src/mcp/relay/); none: refused. */
  relay?: RelayContext;
  /** The call runs as a task of toolrouter's (background): passed on to upstreams that can run the tool as a task. */
  asTask?: boolean;
}

/** tools/list (with SEP-1821 `query`) for one caller; `notes` says which upstreams the answer is missing. */
export async function listTools(
  gateway: McpGateway,
  params: { cursor?: unknown; query?: unknown } | undefined,
  access: Access,
  feedback: McpFeedback,
): Promise<{ tools: Tool[]; nextCursor?: string; _meta?: Record<string, unknown> }> {
  const { cursor, query } = params ?? {};
  if (cursor !== undefined && typeof cursor !== 'string') throw new RpcError(ErrorCode.InvalidParams, 'cursor must be a string');
  if (query !== undefined && typeof query !== 'string') throw new RpcError(ErrorCode.InvalidParams, 'query must be a string');
  try {
    await gateway.startup();
    const listed = await feedback.listed(query, await gateway.listTools({ cursor, query }, access));
    const notes = gateway.upstreamNotes(access);
    return notes ? { ...listed, _meta: { [UPSTREAMS_META]: notes } } : listed;
  } catch (error) {
    throw toMcpError(error);
  }
}

/**
 * tools/call: search_tools, call_tool, or a real tool by name (pinned, or hidden: not listed, still callable). A call
 * is paired with the search it follows for feedback: call_tool's `search_id` argument, or `_meta["toolrouter/search_id"]`
 * on a direct call, names it.
 */
export async function callTool(
  gateway: McpGateway,
  params: { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> },
  context: CallContext,
  access: Access,
  feedback: McpFeedback,
  log: Logger,
  /** `code` for calls made by code mode's programs (the `direct` path); default `mcp`. */
  surface: 'mcp' | 'code' = 'mcp',
): Promise<CallToolResult> {
  return mcpServerToolSpan({ name: params.name, arguments: params.arguments, meta: params._meta }, () => answerToolCall(gateway, params, context, access, feedback, log, surface));
}

async function answerToolCall(...[gateway, params, context, access, feedback, log, surface = 'mcp']: Parameters<typeof callTool>): Promise<CallToolResult> {
  const { name, arguments: args } = params;
  const { searchToolName, callToolName } = gateway.settings;
  const through = gateway.isVirtual(name, access) && name === callToolName;
  feedback.called(through ? args?.name : name, through ? args?.search_id : params._meta?.[SEARCH_ID_META]);
  if (gateway.isVirtual(name, access) && name === searchToolName) return searchTools(gateway, args, access, feedback);
  if (through) return callThrough(gateway, args, context, access);
  if (gateway.codeMode instanceof CodeTool && gateway.isCodeTool(name, access)) {
    // Calls from the code take this same path (callTool), as direct calls of this caller in this request.
    return gateway.codeMode.execute(args, {
      access,
      signal: context.signal,
      direct: (tool, toolArgs) => callTool(gateway, { name: tool, arguments: toolArgs }, context, access, feedback, log, 'code'),
      searched: (query, tools) => void feedback.searched(query, tools),
    });
  }
  return forward(gateway, name, args, context, log, access, surface);
}

export function featureSignature(gateway: McpGateway, access: Access, kind: 'resources' | 'prompts'): string {
  const offered = gateway.offered(access);
  const value = kind === 'resources' ? [offered.resources, offered.templates] : offered.prompts;
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}

/** Runs a gateway operation for a JSON-RPC request: failures become JSON-RPC errors (not-found with `notFoundCode`). */
export async function rpc<T>(work: () => T | Promise<T>, notFoundCode: number = ErrorCode.InvalidParams): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof GatewayError && error.code === 'not_found') throw new RpcError(notFoundCode, error.message);
    if (error instanceof GatewayError && error.code.startsWith('upstream_')) throw new RpcError(ErrorCode.InternalError, error.message, { code: error.code });
    throw toMcpError(error);
  }
}

const searchArgs = compileSchema({
  type: 'object',
  properties: { query: { type: 'string', minLength: 1 }, top_k: { type: 'integer', minimum: 1 }, detail: { enum: ['brief', 'full', 'code'] } },
  required: ['query'],
  additionalProperties: false,
});

/** `_meta` key of a listing or search answered while some upstream servers were connecting or down. */
export const UPSTREAMS_META = 'toolrouter/upstreams';

async function searchTools(gateway: McpGateway, args: Record<string, unknown> | undefined, access: Access, feedback: McpFeedback): Promise<CallToolResult> {
  const problems = searchArgs(args ?? {});
  if (problems.length > 0) return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: ${problems.join('; ')}`);
  // In code mode the model writes code next, so signatures are what it needs by default.
  const codeMode = gateway.codeMode?.enabledFor(access) === true;
  const { query, top_k: topK, detail = codeMode ? 'code' : 'full' } = args as { query: string; top_k?: number; detail?: 'brief' | 'full' | 'code' };
  if (query.trim().length === 0) return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: /query: must not be blank`);
  if (query.length > gateway.settings.maxQueryLength) {
    return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: /query: must be at most ${gateway.settings.maxQueryLength} characters`);
  }
  try {
    await gateway.startup();
    const { tools, matched } = await gateway.searchCounted(query, topK, access);
    gateway.tokens?.served(access, tools);
    const notes = gateway.upstreamNotes(access);
    // Present when feedback is on: a later call_tool may carry it, so the pairing needs no session.
    const searchId = await feedback.searched(query, tools);
    // `select:` always answers with full definitions: it is how a brief answer's tools are fetched.
    const selecting = query.trim().toLowerCase().startsWith(SELECT_PREFIX);
    const brief = detail === 'brief' && !selecting;
    const listed = brief ? tools.map((tool) => ({ ...briefTool(tool), score: tool.score })) : detail === 'code' && !selecting ? tools.map((tool) => searchDetail(tool, 'code', query.trim())) : tools;
    const counted = matched === undefined ? {} : { matched };
    const found = searchId === undefined ? { tools: listed, ...counted } : { tools: listed, ...counted, search_id: searchId };
    // The JSON is for programs; the sentences are for the model, which should not read an empty list as "no such tool
    // exists" when a server is simply not there yet.
    const sentences = [
      ...(tools.length === 0
        ? [`No tool matched "${query}": no tool of the servers searched fits it well enough (min_score). Try other words, or "regex:" / "select:" queries.`]
        : []),
      ...(notes ? [missingServers(notes)] : []),
      ...(tools.length > 0 && matched !== undefined ? [`${tools.length} of ${matched} matching tools${matched > tools.length ? '; ask with a larger top_k for more' : ''}.`] : []),
      ...(brief && tools.length > 0 ? [`Brief definitions: fetch the full ones with "select:${tools.map((tool) => tool.name).join(',')}".`] : []),
    ];
    return {
      content: [{ type: 'text', text: JSON.stringify(found) }, ...sentences.map((text) => ({ type: 'text' as const, text }))],
      structuredContent: found,
      ...(notes ? { _meta: { [UPSTREAMS_META]: notes } } : {}),
    };
  } catch (error) {
    if (error instanceof GatewayError) return errorResult(error.message);
    throw error;
  }
}

const callArgs = compileSchema({
  type: 'object',
  properties: { name: { type: 'string', minLength: 1 }, arguments: { type: 'object' }, search_id: { type: 'string' } },
  required: ['name'],
  additionalProperties: false,
});

function missingServers(notes: UpstreamNotes): string {
  const parts = [
    ...(notes.connecting.length > 0 ? [`still connecting: ${notes.connecting.join(', ')}`] : []),
    ...(notes.down.length > 0 ? [`down: ${notes.down.join(', ')}`] : []),
  ];
  return `Some MCP servers are not available, so their tools are missing from this answer (${parts.join('; ')}). Search again later to include them.`;
}

/**
 * Progress the upstream reports, relayed under the caller's own progress token; none when the caller did not ask. The
 * SDK gives the upstream a token of ours, as tokens are per connection.
 */
function relayProgress(context: CallContext): ((progress: UpstreamProgress) => void) | undefined {
  const token = context.progressToken;
  if (token === undefined) return undefined;
  return ({ progress, total, message }) => {
    void context
      .notify({
        method: 'notifications/progress',
        params: { progressToken: token, progress, ...(total === undefined ? {} : { total }), ...(message === undefined ? {} : { message }) },
      })
      .catch(() => {});
  };
}

async function callThrough(gateway: McpGateway, args: Record<string, unknown> | undefined, context: CallContext, access: Access): Promise<CallToolResult> {
  const problems = callArgs(args ?? {});
  if (problems.length > 0) return errorResult(`invalid arguments for ${gateway.settings.callToolName}: ${problems.join('; ')}`);
  const { name, arguments: inner } = args as { name: string; arguments?: Record<string, unknown> };
  try {
    // The client's cancellation (context.signal) is handed to the upstream call, which sends notifications/cancelled on.
    return await gateway.callTool(name, inner, { signal: context.signal, access, onProgress: relayProgress(context), ...relayOf(context) });
  } catch (error) {
    // The target is an argument the model chose: a target this key may not use is a failed call it can read and
    // recover from (search again), like any other, not a protocol error that ends the model's turn.
    if (error instanceof GatewayError) return errorResult(error.message);
    throw elicitationRequired(error);
  }
}

async function forward(
  gateway: McpGateway,
  name: string,
  args: Record<string, unknown> | undefined,
  context: CallContext,
  log: Logger,
  access: Access,
  surface: 'mcp' | 'code' = 'mcp',
): Promise<CallToolResult> {
  try {
    return await gateway.callTool(name, args, { signal: context.signal, access, onProgress: relayProgress(context), ...relayOf(context), surface });
  } catch (error) {
    if (error instanceof GatewayError && error.code === 'forbidden') throw forbidden(error.message);
    // Governance refusals of a direct call are JSON-RPC errors naming the code and the deciding policies (or rule).
    if (error instanceof GatewayError && GOVERNANCE_CODES.has(error.code)) {
      throw new RpcError(error.code === 'audit_unavailable' ? ErrorCode.InternalError : ACCESS_DENIED, error.message, { code: error.code, ...error.details });
    }
    // Called directly, a name nobody serves cannot be routed: a JSON-RPC error, not a tool result.
    if (error instanceof GatewayError && error.code === 'unknown_tool') throw new RpcError(ErrorCode.InvalidParams, error.message);
    if (error instanceof GatewayError) return errorResult(error.message);
    if (error instanceof UrlElicitationRequiredError) throw elicitationRequired(error);
    log.error({ err: error, tool: name }, 'tool call failed');
    throw error;
  }
}

const GOVERNANCE_CODES = new Set<string>(['policy_denied', 'confirmation_required', 'guardrail_blocked', 'audit_unavailable']);

function relayOf(context: CallContext): { relay?: RelayContext; asTask?: boolean } {
  return { ...(context.relay ? { relay: context.relay } : {}), ...(context.asTask ? { asTask: true } : {}) };
}

/**
 * The user must authorize their own account first (a per-user OAuth upstream): MCP's URLElicitationRequired (-32042),
 * its `data.elicitations` naming the URL, so the client can show it (2025-11-25 and later).
 */
function elicitationRequired(error: unknown): unknown {
  if (!(error instanceof UrlElicitationRequiredError)) return error;
  return new RpcError(URL_ELICITATION_REQUIRED, error.message, { elicitations: error.elicitations });
}

function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

function forbidden(message: string): RpcError {
  return new RpcError(ACCESS_DENIED, message, { status: 403 });
}

function toMcpError(error: unknown): unknown {
  if (!(error instanceof GatewayError)) return error;
  if (error.code === 'forbidden') return forbidden(error.message);
  if (GOVERNANCE_CODES.has(error.code)) return new RpcError(error.code === 'audit_unavailable' ? ErrorCode.InternalError : ACCESS_DENIED, error.message, { code: error.code, ...error.details });
  if (error.code === 'index_not_ready') return new RpcError(ErrorCode.InternalError, error.message);
  return new RpcError(ErrorCode.InvalidParams, error.message);
}

/** One line on code mode for the instructions, when it is on for this caller. */
function codeModeLine(gateway: McpGateway, access: Access): string[] {
  if (!gateway.codeMode?.enabledFor(access)) return [];
  const { searchToolName: search } = gateway.settings;
  return [
    `Code mode: ${gateway.codeMode.name} {"code": "..."} runs JavaScript (the body of an async function) with await call_tool(name, args), await search_tools(query) and console.log: chain several calls in one step and return only the combined answer. ${search} answers with TypeScript signatures by default here.`,
  ];
}

/** Sent at initialization; clients may put it in the model's context, so it says how to use the gateway, briefly. */
export function instructions(gateway: McpGateway, access: Access = Access.open): string {
  const { searchToolName: search, callToolName: call, queryLimit } = gateway.settings;
  const queryFormat = [
    'Query format (the same everywhere):',
    '- plain words describing the task, ranked by keyword and meaning: "send an email", "list open pull requests"',
    '- "select:name1,name2" returns exactly those tools by name',
    '- "regex:<pattern>" matches tool names and descriptions with an RE2 regular expression, e.g. "regex:^github__"',
    `SEP-1821: tools/list accepts params.query in this format and returns the matching tools of the whole catalog (at most ${queryLimit}, best first, paginated with nextCursor), e.g. {"method": "tools/list", "params": {"query": "read a file"}}.`,
  ];
  if (gateway.settings.search === false || !access.searchEnabled) {
    return ['toolrouter aggregates the tools of several MCP servers; tools/list lists all of them.', ...codeModeLine(gateway, access), ...queryFormat].join('\n');
  }
  const { maxTools, maxTokens } = gateway.settings.activation;
  const listing =
    gateway.settings.search === 'auto'
      ? `toolrouter is a gateway to the tools of several MCP servers. While they are few (at most ${maxTools} tools and ${maxTokens} tokens of definitions), tools/list lists all of them; beyond that only a few are listed, with ${search} and ${call} to find and run the others. Each switch is announced with notifications/tools/list_changed; ${search} and ${call} work in both states.`
      : 'toolrouter is a gateway to the tools of several MCP servers. Only a few tools are listed; find the others by search.';
  const covers = gateway.coverage(access);
  return [
    listing,
    ...(covers === '' ? [] : [covers]),
    `1. ${search} {"query": "what you want to do", "top_k": 5} returns the best matching tools with their full definitions ("detail": "brief" for short ones); nothing when no tool fits.`,
    `2. ${call} {"name": "<tool name>", "arguments": {...}} runs that tool and returns its result unchanged. Any tool may also be called directly by its name.`,
    'Errors in a call (invalid arguments, unknown tool, timeout, a server that is down) come back as a result with isError set and say what to fix.',
    ...codeModeLine(gateway, access),
    ...queryFormat,
  ].join('\n');
}
