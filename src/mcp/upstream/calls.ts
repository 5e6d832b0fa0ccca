/** Forwarding requests to a connected upstream, and what a failed one means for the caller. */
import { LOG_LEVEL_META_KEY, ProtocolError, SdkError, SdkErrorCode, type Client } from '@modelcontextprotocol/client';
import { CallToolResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { withoutRepeatedCode } from './errors.js';
import type { LogLevel } from '../relay/channel.js';
import { RESULT_TOO_LARGE } from './bounds.js';
import { UpstreamError, type UpstreamCallOptions } from './types.js';

/**
 * The call's `_meta`: the trace context, and for a 2026-07-28 upstream (which takes the log level per request) the
 * level the calling session set with logging/setLevel (src/mcp/relay/levels.ts).
 */
function metaOf(client: Client, options: UpstreamCallOptions): { _meta?: Record<string, unknown> } {
  const level: LogLevel | undefined = client.getProtocolEra() === 'modern' ? options.relay?.channel?.level?.() : undefined;
  if (level === undefined) return options.meta ? { _meta: options.meta } : {};
  return { _meta: { ...options.meta, [LOG_LEVEL_META_KEY]: level } };
}

/**
 * logging/setLevel on a 2025-era connection whose server offers logging (a 2026-07-28 one takes the level per call).
 * Failures are the server's business: the sessions still filter what they get.
 */
export async function setUpstreamLogLevel(client: Client, level: LogLevel, timeoutMs: number): Promise<void> {
  if (client.getProtocolEra() === 'modern' || !client.getServerCapabilities()?.logging) return;
  await client.setLoggingLevel(level, { timeout: timeoutMs });
}

/**
 * Whether a call goes out task-augmented: always for a tool the upstream runs only as a task; for one it can run
 * either way, when the caller itself runs the call as a task and the upstream (a 2025-era connection: the 2026-07-28
 * revision has no tasks in core) declares tasks for tools/call. The upstream then keeps the work as a task of its own,
 * and toolrouter waits for it with tasks/result rather than one long request.
 */
export function runsAsTask(client: Client, taskSupport: 'required' | 'optional' | undefined, options: UpstreamCallOptions): boolean {
  if (taskSupport === 'required') return true;
  if (taskSupport !== 'optional' || !options.asTask || client.getProtocolEra() === 'modern') return false;
  const tasks = (client.getServerCapabilities() as { tasks?: { requests?: { tools?: { call?: unknown } } } } | undefined)?.tasks;
  return tasks?.requests?.tools?.call !== undefined;
}

/** tools/call under the upstream's own name; the result comes back as the upstream gave it. */
export async function callTool(client: Client, name: string, args: Record<string, unknown> | undefined, options: UpstreamCallOptions): Promise<CallToolResult> {
  // request() rather than callTool(): callTool also checks structured output against the tool's outputSchema, and a
  // proxy hands the upstream's result back as it is.
  return client.request({ method: 'tools/call', params: { name, ...(args === undefined ? {} : { arguments: args }), ...metaOf(client, options) } }, CallToolResultSchema as never, {
    timeout: options.timeoutMs,
    signal: options.signal,
    // The SDK sends its own progress token upstream and hands us each notification for it.
    ...(options.onProgress ? { onprogress: options.onProgress } : {}),
  });
}

/** What tools/call answers when asked to run as a task (MCP 2025-11-25 CreateTaskResult), as far as we read it. */
const CreatedTask = z.looseObject({ task: z.looseObject({ taskId: z.string(), status: z.string() }) });

/**
 * tools/call of a tool the upstream runs only as a task: the call is made task-augmented, then `tasks/result` waits for
 * the task's end and brings its result (what the upstream asks meanwhile, e.g. elicitation, is relayed as during any
 * call). A caller who gives up cancels the task upstream.
 */
export async function callAsTask(client: Client, name: string, args: Record<string, unknown> | undefined, options: UpstreamCallOptions): Promise<CallToolResult> {
  const deadline = Date.now() + options.timeoutMs;
  const created = await client.request(
    {
      method: 'tools/call',
      params: { name, ...(args === undefined ? {} : { arguments: args }), task: { ttl: options.timeoutMs }, ...metaOf(client, options) },
    },
    CreatedTask as never,
    { timeout: options.timeoutMs, signal: options.signal },
  ) as z.infer<typeof CreatedTask>;
  const { taskId } = created.task;
  const cancel = () => void client.request({ method: 'tasks/cancel', params: { taskId } }, z.looseObject({}) as never, { timeout: 5_000 }).catch(() => {});
  options.signal?.addEventListener('abort', cancel, { once: true });
  try {
    const result = (await client.request({ method: 'tasks/result', params: { taskId } }, CallToolResultSchema as never, {
      timeout: Math.max(1, deadline - Date.now()),
      signal: options.signal,
    })) as CallToolResult;
    return withoutUpstreamTask(result);
  } catch (error) {
    if (!options.signal?.aborted) cancel();
    throw error;
  } finally {
    options.signal?.removeEventListener('abort', cancel);
  }
}

/** The `_meta` key naming the task a message belongs to (MCP 2025-11-25); tasks/result carries it. */
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/**
 * The upstream's result without its task id: the upstream's task is toolrouter's own business (the caller made a plain
 * call, or has a task of toolrouter's, whose id the caller's SDK adds itself); an upstream id reaching the client is
 * one it cannot use anywhere (tasks/get on it: not found).
 */
export function withoutUpstreamTask(result: CallToolResult): CallToolResult {
  if (result._meta?.[RELATED_TASK] === undefined) return result;
  const { [RELATED_TASK]: _upstream, ...meta } = result._meta;
  const { _meta: _dropped, ...rest } = result;
  return Object.keys(meta).length > 0 ? { ...rest, _meta: meta } : rest;
}

/** resources/read, prompts/get, a subscription change: as it is. */
export async function forward<T extends z.ZodType>(
  client: Client,
  request: { method: string; params: Record<string, unknown> },
  schema: T,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<z.infer<T>> {
  return (await client.request(request, schema, { timeout: options.timeoutMs, signal: options.signal })) as z.infer<T>;
}

/**
 * Why a forwarded request produced no result, as an UpstreamError. `connectionInDoubt` runs when the failure may be
 * the connection dying (a ping then decides); `describe` gives the real cause of a transport failure.
 */
export function callFailure(
  server: string,
  error: unknown,
  what: string,
  options: { timeoutMs: number; signal?: AbortSignal },
  connectionInDoubt: () => void,
  describe: (error: unknown) => string,
): UpstreamError {
  if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
    // The SDK has already sent notifications/cancelled upstream.
    return new UpstreamError('upstream_timeout', `upstream MCP server "${server}" did not answer ${what} within ${options.timeoutMs} ms`);
  }
  if (error instanceof ProtocolError && error.code === RESULT_TOO_LARGE) {
    // Our own bound (bounds.ts), not the upstream's answer: the connection is fine.
    return new UpstreamError('upstream_error', `the result of ${what} from upstream MCP server "${server}" was refused: ${withoutRepeatedCode(error.message)}`);
  }
  if (error instanceof ProtocolError) {
    return new UpstreamError('upstream_error', `upstream MCP server "${server}" answered with an error: ${withoutRepeatedCode(error.message)}`);
  }
  // Our own client gave up on the call (the SDK forwarded the cancellation upstream): not the upstream's fault.
  if (options.signal?.aborted) return new UpstreamError('upstream_error', `the call to ${what} was cancelled`);
  // The connection failed under the call: find out now rather than at the next ping.
  connectionInDoubt();
  return new UpstreamError('upstream_unavailable', `upstream MCP server "${server}" failed during ${what}: ${describe(error)}`, 1, server);
}
