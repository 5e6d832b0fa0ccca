import { Readable } from 'node:stream';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import {
  CLIENT_CAPABILITIES_META_KEY,
  createMcpHandler,
  inputRequired,
  isLegacyRequest,
  ProtocolError,
  Server,
  type AuthInfo,
  type CallToolResult,
  type JSONRPCRequest,
  type Result,
  type McpHttpHandler,
  type ServerCapabilities,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Request as ExpressRequest, Response as ExpressResponse } from 'express';
import type { Logger } from 'pino';
import { z } from 'zod';
import { Access } from '../../auth/access.js';
import { McpFeedback } from '../gateway/feedback-capture.js';
import { describeIssues, readableParams } from './params.js';
import { bareMessage } from './rpc-error.js';
import { isSharedStateUnavailable, SHARED_STATE_DATA, SHARED_STATE_MESSAGE, SHARED_STATE_UNAVAILABLE } from './unavailable.js';
import { RETRYABLE_SERVER_ERROR } from './rpc-error.js';
import { isRedisErrorText, REDIS_UNAVAILABLE_MESSAGE } from '../../redis/connection.js';
import { declared } from '../relay/channel.js';
import { InputRounds, RoundHolderGoneError } from '../relay/rounds.js';
import { declaresTasks, detailedTask, TASKS_EXTENSION } from '../relay/task-inputs.js';
import { ownerOf } from '../relay/tasks.js';
import type { McpGateway } from '../gateway/gateway.js';
import { callTool, featureSignature, instructions, listTools, rpc, startTask, UPSTREAMS_META, type CallContext } from './server.js';
import { IMPLEMENTATION } from '../version.js';
import { URL_ELICITATION_REQUIRED } from '../upstream/oauth/elicitation.js';

/**
 * The 2026-07-28 (stateless) revision of the MCP face, on the SDK's v2 server package. Each request is served by a
 * fresh SDK server built for the caller that sent it (its key comes from that request's Authorization); nothing is
 * held between requests. Change notifications reach clients through `subscriptions/listen` streams, fed from the
 * gateway's events. The behaviour is McpGateway's and the request handlers shared with the 2025 face (server.ts).
 */

/**
 * How long a client may reuse a complete list result (`ttlMs`). Changes are pushed through subscriptions/listen, so a
 * listening client learns of them at once; this only bounds how stale a client that does not listen can get.
 */
export const LIST_TTL_MS = 30_000;

/**
 * Capabilities on the stateless revision: tools (with SEP-1821 `filtering`), resources and prompts, each with change
 * notifications through subscriptions/listen. Per-resource update notifications are not offered here: on the 2025
 * revision they ride the session's resources/subscribe, which the gateway relays to the upstream; the stateless
 * revision has no session to own such an upstream subscription.
 */
const MODERN_CAPABILITIES = {
  tools: { listChanged: true, filtering: true },
  resources: { listChanged: true },
  prompts: { listChanged: true },
  completions: {},
  // The tasks extension (SEP-2663): a tools/call of a tool its server runs only as a task is answered with a task for
  // a client that declared the extension on the request; tasks/get, tasks/update, tasks/cancel (src/mcp/relay/task-inputs.ts).
  extensions: { [TASKS_EXTENSION]: {} },
} as ServerCapabilities;

/**
 * JSON-RPC code for a round retry whose waiting upstream call was on an instance that is gone (killed): an
 * implementation-defined server error, so clients can tell it from a malformed request (-32602) and call again.
 */
export const ROUND_HOLDER_GONE = -32010;

/** tasks/get, tasks/update and tasks/cancel params (the extension's own methods: the SDK has no schemas for them). */
const TaskIdParams = z.looseObject({ taskId: z.string().min(1) });
const UpdateTaskParams = z.looseObject({ taskId: z.string().min(1), inputResponses: z.record(z.string(), z.unknown()).optional() });

/**
 * A tools/call answered with a task (`resultType: "task"`): thrown past the SDK's tools/call result check, which knows
 * only CallToolResult and input-required results and would strip a CreateTaskResult's fields, and returned as it is.
 */
class TaskCreated extends Error {
  constructor(readonly result: Result) {
    super('task created');
  }
}

/** -32021 for a tasks/* request whose client did not declare the extension on it, as the extension requires. */
function requireTasksExtension(ctx: ServerContext): void {
  if (declaresTasks((ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY])) return;
  throw new ProtocolError(-32021, 'Missing required client capability', { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
}

/** tools/call params (the `_meta` envelope is lifted out by the SDK before the handler). */
const CallParams = z.looseObject({ name: z.string().min(1), arguments: z.record(z.string(), z.unknown()).optional() });

/** tools/list params as SEP-1821 extends them; listTools checks their types. */
const ListToolsParams = z.looseObject({ cursor: z.unknown().optional(), query: z.unknown().optional() });

/** `authInfo.extra` field carrying the caller's Access from the HTTP auth middleware to the per-request server. */
const ACCESS_FIELD = 'toolrouterAccess';

/**
 * `ttlMs` and `cacheScope` for a list result. The list depends on the caller's key whenever keys exist (allowed
 * servers and tools, tool search on or off, feedback scope), so only an open service (no ADMIN_KEY: everyone sees the
 * same) marks it `public`; a keyed caller's list is `private` (cacheable by that client only, i.e. per key). An answer
 * given while upstreams are still connecting or down is incomplete: `ttlMs: 0`.
 */
export function cacheHint(access: Access, result: { _meta?: Record<string, unknown> }): { ttlMs: number; cacheScope: 'public' | 'private' } {
  const incomplete = result._meta?.[UPSTREAMS_META] !== undefined;
  return { ttlMs: incomplete ? 0 : LIST_TTL_MS, cacheScope: access.kind === 'open' ? 'public' : 'private' };
}

/** v1-style errors (the shared handlers throw RpcError) as the v2 SDK's ProtocolError, with the same code and data. */
async function v2<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof McpError) throw new ProtocolError(error.code, bareMessage(error.code, error.message), error.data);
    // Redis away (restarting, out of memory): retryable, without Redis's own words (unavailable.ts).
    if (isSharedStateUnavailable(error)) throw new ProtocolError(SHARED_STATE_UNAVAILABLE, SHARED_STATE_MESSAGE, { ...SHARED_STATE_DATA });
    // Any other error carrying Redis's own text: it never reaches a client (src/mcp/server/rpc-error.ts withBareError does the same on 2025).
    if (isRedisErrorText(error)) throw new ProtocolError(RETRYABLE_SERVER_ERROR, REDIS_UNAVAILABLE_MESSAGE, { code: 'redis_unavailable', retryable: true });
    throw error;
  }
}

/** The input request key under which a per-user upstream's authorization URL is asked for. */
const AUTHORIZE_INPUT = 'toolrouter_authorize';

/**
 * A per-user upstream needs the caller's own authorization (-32042 on 2025 revisions): on 2026-07-28 that is an
 * input-required result carrying a URL elicitation. A retry that answered it but still finds no grant is told so as a
 * failed call, rather than asked again in a loop.
 */
function authorizationRequest(error: unknown, answered: Record<string, unknown> | undefined): never | ReturnType<typeof inputRequired> | CallToolResult {
  const elicitation = error instanceof McpError && error.code === URL_ELICITATION_REQUIRED ? (error.data as { elicitations?: { url: string; message: string }[] } | undefined)?.elicitations?.[0] : undefined;
  if (!elicitation) throw error;
  if (answered?.[AUTHORIZE_INPUT] !== undefined) {
    return { content: [{ type: 'text', text: `${error instanceof Error ? error.message : ''} (not authorized yet: ${elicitation.url})` }], isError: true };
  }
  return inputRequired({ inputRequests: { [AUTHORIZE_INPUT]: inputRequired.elicitUrl({ url: elicitation.url, message: elicitation.message }) } });
}

/**
 * The v2 SDK server, with a client's params mistakes answered in words: every method's SDK check (which answers
 * -32603 with a raw dump) goes through readableParams (params.ts, -32602 naming the field); tools/call's, which the
 * SDK answers -32602 with its raw dump in the message, keeps the code and gets the message in words.
 */
class ReadableParamsServer extends Server {
  protected override _wrapHandler(
    method: string,
    handler: (request: JSONRPCRequest, ctx: ServerContext) => Promise<Result>,
  ): (request: JSONRPCRequest, ctx: ServerContext) => Promise<Result> {
    const wrapped = super._wrapHandler(method, readableParams(method, handler, (message) => new ProtocolError(-32602, message)));
    if (method !== 'tools/call') return wrapped;
    return async (request, ctx) => {
      try {
        return await wrapped(request, ctx);
      } catch (error) {
        if (error instanceof TaskCreated) return error.result;
        const checked = error instanceof ProtocolError && error.code === -32602 ? CallParams.safeParse(request.params ?? {}) : undefined;
        if (checked && !checked.success) throw new ProtocolError(-32602, `invalid params for tools/call: ${describeIssues(checked.error.issues, ['params'])}`);
        throw error;
      }
    };
  }
}

/**
 * One v2 SDK server over the gateway for one caller: per request on HTTP, per connection on stdio. `live` (stdio):
 * the instance stays connected, so it forwards the gateway's change events as notifications, which the SDK routes to
 * the connection's subscriptions/listen streams.
 */
export function createModernServer(gateway: McpGateway, log: Logger, access: Access = Access.open, live = false, rounds?: InputRounds): Server {
  const server = new ReadableParamsServer(IMPLEMENTATION, { capabilities: MODERN_CAPABILITIES, instructions: instructions(gateway, access) });
  // Stateless: no session history; pairing comes from the search id or this key's recent searches.
  const feedback = new McpFeedback(gateway.searches, () => access.scope);
  // Tasks of the 2026-07-28 extension belong to the caller's key (or subject): no session on this revision.
  const taskOwner = `${ownerOf(access)} 2026-07-28`;

  // With its own params schema: the SDK's tools/list schema would strip SEP-1821's `query` before the handler sees it.
  server.setRequestHandler('tools/list', { params: ListToolsParams }, async (params) =>
    v2(async () => {
      const listed = await listTools(gateway, params, access, feedback);
      // The catalog's Tool type is looser than the v2 SDK's JSON types; the values are the same JSON.
      return { ...listed, ...cacheHint(access, listed) } as never;
    }),
  );
  server.setRequestHandler('tools/call', async (request, ctx) =>
    v2(async () => {
      const context: CallContext = {
        signal: ctx.mcpReq.signal,
        progressToken: ctx.mcpReq._meta?.progressToken,
        notify: (notification) => ctx.mcpReq.notify(notification),
      };
      const params = request.params as { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> };
      const capabilities = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY];
      if (declaresTasks(capabilities) && ctx.mcpReq.requestState() === undefined && gateway.isLongJob(params.name, params.arguments)) {
        // A job its server runs only as a task: answered at once with a task of this key; what the upstream asks
        // meanwhile waits in the task's inputRequests for tasks/update. Progress and log messages are not carried.
        const supports = (feature: Parameters<typeof declared>[1]) => declared(capabilities as never, feature);
        const task = await startTask(() =>
          gateway.tasks.start(taskOwner, undefined, async (signal, taskId) => {
            // Written in order, with the requests outstanding at the time, so any instance shows them (tasks/get).
            let written = Promise.resolve();
            const status = (next: 'working' | 'input_required') => {
              written = written
                .then(() => gateway.tasks.progress(taskId, next, next === 'input_required' ? gateway.taskInputs.outstanding(taskId) : undefined))
                .catch((error: unknown) => log.debug({ err: error, taskId }, 'task status not written'));
            };
            try {
              return await callTool(
                gateway,
                params,
                { signal, notify: async () => {}, relay: { channel: gateway.taskInputs.channel(taskId, supports, status) }, asTask: true },
                access,
                feedback,
                log,
              );
            } finally {
              gateway.taskInputs.drop(taskId);
              await written;
            }
          }),
        );
        throw new TaskCreated({ resultType: 'task', ...detailedTask(task, {}) });
      }
      try {
        if (!rounds) return (await callTool(gateway, params, context, access, feedback, log)) as CallToolResult;
        // What the upstream asks during the call comes back as input-required rounds (src/mcp/relay/rounds.ts).
        const owner = access.subject ?? access.key?.keyId ?? access.kind;
        const state = ctx.mcpReq.requestState<unknown>();
        const round =
          typeof state === 'string'
            ? await rounds.resume<CallToolResult>(owner, state, ctx.mcpReq.inputResponses)
            : await rounds.start(
                owner,
                (feature) => declared((ctx.mcpReq.envelope as Record<string, never> | undefined)?.[CLIENT_CAPABILITIES_META_KEY], feature),
                (channel, signal) => callTool(gateway, params, { ...context, signal, relay: { channel } }, access, feedback, log),
              );
        if (!round) throw new ProtocolError(-32602, 'unknown or expired requestState (or no answer to the input request): call the tool again without it');
        if ('done' in round) return round.done as CallToolResult;
        return { resultType: 'input_required', inputRequests: round.inputRequests, requestState: round.requestState } as never;
      } catch (error) {
        // Not the client's mistake and nothing to fix but to start over: the code of a server error, said so in data.
        if (error instanceof RoundHolderGoneError) throw new ProtocolError(ROUND_HOLDER_GONE, error.message, { retryable: true, retry: 'call the tool again without requestState' });
        return authorizationRequest(error, ctx.mcpReq.inputResponses);
      }
    }),
  );
  server.setRequestHandler('tasks/get', { params: TaskIdParams }, async ({ taskId }, ctx) =>
    v2(async () => {
      requireTasksExtension(ctx);
      // From the task's record, wherever it runs (src/state/tasks.ts); a task whose instance is gone reads failed.
      const record = await gateway.tasks.get(taskOwner, taskId);
      if (!record) throw new ProtocolError(-32602, 'Failed to retrieve task: Task not found');
      return detailedTask(record.task, {
        ...(record.inputRequests ? { inputRequests: record.inputRequests } : {}),
        ...(record.result ? { result: record.result } : {}),
        ...(record.error ? { error: record.error } : {}),
      }) as never;
    }),
  );
  server.setRequestHandler('tasks/update', { params: UpdateTaskParams }, async ({ taskId, inputResponses }, ctx) =>
    v2(async () => {
      requireTasksExtension(ctx);
      // The SDK lifts `inputResponses` out of every request's params (its multi-round-trip field) into the context.
      const responses = inputResponses ?? (ctx.mcpReq.inputResponses as Record<string, unknown> | undefined);
      if (!(await gateway.tasks.get(taskOwner, taskId))) throw new ProtocolError(-32602, 'Failed to update task: Task not found');
      if (responses === undefined || typeof responses !== 'object') throw new ProtocolError(-32602, 'invalid params for tasks/update: params.inputResponses: expected an object');
      // Reaches the instance running the task's upstream call, wherever this request landed.
      await gateway.tasks.answer(taskOwner, taskId, responses);
      return {} as never;
    }),
  );
  server.setRequestHandler('tasks/cancel', { params: TaskIdParams }, async ({ taskId }, ctx) =>
    v2(async () => {
      requireTasksExtension(ctx);
      if (!(await gateway.tasks.cancel(taskOwner, taskId))) throw new ProtocolError(-32602, 'Failed to cancel task: Task not found');
      return {} as never;
    }),
  );
  server.setRequestHandler('resources/list', async (request) =>
    v2(async () => {
      const listed = await rpc(() => gateway.listResources({ cursor: request.params?.cursor }, access));
      return { ...listed, ...cacheHint(access, {}) };
    }),
  );
  server.setRequestHandler('resources/templates/list', async (request) =>
    v2(async () => {
      const listed = await rpc(() => gateway.listResourceTemplates({ cursor: request.params?.cursor }, access));
      return { ...listed, ...cacheHint(access, {}) };
    }),
  );
  server.setRequestHandler('prompts/list', async (request) =>
    v2(async () => {
      const listed = await rpc(() => gateway.listPrompts({ cursor: request.params?.cursor }, access));
      return { ...listed, ...cacheHint(access, {}) };
    }),
  );
  // Resource contents are the upstream's and may change at any time: not cached.
  server.setRequestHandler('resources/read', async (request, ctx: ServerContext) =>
    v2(async () => ({
      ...((await rpc(() => gateway.readResource(request.params.uri, { signal: ctx.mcpReq.signal, access }), -32002)) as object),
      ttlMs: 0,
      cacheScope: 'private' as const,
    })) as never,
  );
  server.setRequestHandler('completion/complete', async (request, ctx: ServerContext) =>
    v2(async () => (await rpc(() => gateway.complete(request.params as never, { signal: ctx.mcpReq.signal, access }))) as never),
  );
  server.setRequestHandler('prompts/get', async (request, ctx: ServerContext) =>
    v2(async () => (await rpc(() => gateway.getPrompt(request.params.name, request.params.arguments, { signal: ctx.mcpReq.signal, access }))) as never),
  );

  if (live) followGateway(gateway, server, access, log);
  return server;
}

/** For a connected instance (stdio): the gateway's changes as notifications, sent only when this caller's view changed. */
function followGateway(gateway: McpGateway, server: Server, access: Access, log: Logger): void {
  const notify = (send: Promise<void>) => void send.catch((error: unknown) => log.debug({ err: error }, 'notification not delivered'));
  let listSignature = gateway.listSignature(access);
  let resourceSignature = featureSignature(gateway, access, 'resources');
  let promptSignature = featureSignature(gateway, access, 'prompts');
  const onListChanged = () => {
    const signature = gateway.listSignature(access);
    if (signature === listSignature) return;
    listSignature = signature;
    if (server.transport) notify(server.sendToolListChanged());
  };
  const onFeatures = () => {
    if (!server.transport) return;
    const resources = featureSignature(gateway, access, 'resources');
    const prompts = featureSignature(gateway, access, 'prompts');
    if (resources !== resourceSignature) notify(server.sendResourceListChanged());
    if (prompts !== promptSignature) notify(server.sendPromptListChanged());
    resourceSignature = resources;
    promptSignature = prompts;
  };
  gateway.on('listChanged', onListChanged);
  gateway.on('featuresChanged', onFeatures);
  const previousOnClose = server.onclose;
  server.onclose = () => {
    gateway.off('listChanged', onListChanged);
    gateway.off('featuresChanged', onFeatures);
    previousOnClose?.();
  };
}

export interface ModernHttpFace {
  /** Whether this POST is for the stateless revision (the rest, 2025 traffic, goes to the session face). */
  claims(req: ExpressRequest): Promise<boolean>;
  serve(req: ExpressRequest, res: ExpressResponse, access: Access): Promise<void>;
  /** Open subscriptions/listen streams are ended (with their empty result) and in-flight requests aborted. */
  close(): Promise<void>;
}

/**
 * /mcp for 2026-07-28 clients: the v2 SDK's handler with its own 2025 fallback off (`legacy: 'reject'`), because 2025
 * clients keep their sessions on the existing face. The gateway's change events are published on the handler's bus,
 * reaching every open subscriptions/listen stream that asked for that kind of notification. The bus has no notion of
 * keys, so a listener hears of a tools change even when only another key's list changed (a spurious re-list, never a
 * missed change).
 */
export function modernHttpFace(gateway: McpGateway, log: Logger, options: { maxSubscriptions: number }): ModernHttpFace {
  // Upstream calls waiting for a client's answer between the rounds of a 2026-07-28 tools/call.
  // A retry may reach any instance: it is forwarded to the one holding the call (src/mcp/relay/rounds.ts).
  const rounds = new InputRounds(gateway.settings.callTimeoutMs, undefined, { instances: gateway.tasks.instances, secrets: gateway.tasks.roundSecrets });
  const handler: McpHttpHandler = createMcpHandler(
    (ctx) => createModernServer(gateway, log, accessFrom(ctx.authInfo), false, rounds),
    {
      legacy: 'reject',
      maxSubscriptions: options.maxSubscriptions,
      onerror: (error) => log.debug({ err: error }, 'mcp (2026-07-28) request rejected or failed'),
    },
  );
  const onListChanged = () => handler.notify.toolsChanged();
  let resources = featureSignature(gateway, Access.open, 'resources');
  let prompts = featureSignature(gateway, Access.open, 'prompts');
  const onFeatures = () => {
    const nextResources = featureSignature(gateway, Access.open, 'resources');
    const nextPrompts = featureSignature(gateway, Access.open, 'prompts');
    if (nextResources !== resources) handler.notify.resourcesChanged();
    if (nextPrompts !== prompts) handler.notify.promptsChanged();
    resources = nextResources;
    prompts = nextPrompts;
  };
  gateway.on('listChanged', onListChanged);
  gateway.on('featuresChanged', onFeatures);

  return {
    claims: async (req) => !(await isLegacyRequest(toWebRequest(req, new AbortController().signal), req.body)),
    serve: async (req, res, access) => {
      // The client going away aborts the exchange (and closes a listen stream).
      const aborter = new AbortController();
      res.on('close', () => aborter.abort());
      const authInfo: AuthInfo = { token: '', clientId: access.key?.keyId ?? access.kind, scopes: [], extra: { [ACCESS_FIELD]: access } };
      const response = await handler.fetch(toWebRequest(req, aborter.signal), { authInfo, parsedBody: req.body });
      await sendWebResponse(response, res);
    },
    close: async () => {
      gateway.off('listChanged', onListChanged);
      gateway.off('featuresChanged', onFeatures);
      rounds.close();
      await handler.close();
    },
  };
}

function accessFrom(authInfo: AuthInfo | undefined): Access {
  const access = authInfo?.extra?.[ACCESS_FIELD];
  // Only this face builds the authInfo; anything else would be a wiring bug, so fail closed.
  if (!(access instanceof Access)) throw new Error('mcp: request without caller access');
  return access;
}

/** The Express request as a web Request (headers and URL; the body was parsed already and is handed over separately). */
function toWebRequest(req: ExpressRequest, signal: AbortSignal): globalThis.Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  const url = `http://${req.headers.host ?? 'localhost'}${req.originalUrl}`;
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  return new Request(url, { method: req.method, headers, signal, ...(hasBody ? { body: JSON.stringify(req.body ?? null) } : {}) });
}

/** Writes a web Response (JSON or an SSE stream) to the Express response, streaming as it comes. */
async function sendWebResponse(response: globalThis.Response, res: ExpressResponse): Promise<void> {
  res.status(response.status);
  response.headers.forEach((value, name) => res.setHeader(name, value));
  if (!response.body) {
    res.end();
    return;
  }
  res.flushHeaders();
  const body = Readable.fromWeb(response.body as import('node:stream/web').ReadableStream);
  await new Promise<void>((resolve) => {
    body.on('error', () => resolve());
    res.on('close', () => {
      body.destroy();
      resolve();
    });
    body.pipe(res);
    body.on('end', () => resolve());
  });
}
