import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  McpError,
  type CallToolResult,
  type ServerCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import { Access } from '../auth/access.js';
import { compileSchema } from '../catalog/json-schema.js';
import { GatewayError, type McpGateway } from './gateway.js';
import { IMPLEMENTATION } from './version.js';
import { McpSessionFeedback } from '../feedback/capture.js';

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
 * `filtering` yet; the server sends capabilities as given, so it reaches clients.
 */
const CAPABILITIES = { tools: { listChanged: true, filtering: true } } as ServerCapabilities;

/**
 * One MCP server over the gateway, for one client connection (an /mcp session or the stdio pipe): the SDK Server
 * holds per-connection protocol state, so each connection gets its own, all sharing the gateway.
 *
 * Error style (MCP 2025-11-25, SEP-1303): a JSON-RPC error only when the request cannot be routed: a malformed
 * request, an unknown top-level tool name, a bad cursor or query. Everything that fails once a tool is known (invalid
 * arguments, recursion through call_tool, an unknown tool named inside call_tool, upstream timeout, upstream down or
 * failing) is a tool result with `isError: true` and a message saying what to fix, which the model can read and act on.
 */
/**
 * JSON-RPC error code for a tool the caller's key may not use: the MCP form of HTTP 403 (an implementation-defined
 * server error code, so clients can tell it from a malformed request). `data.status` says 403 for HTTP-minded clients.
 */
export const ACCESS_DENIED = -32003;

export function createMcpServer(gateway: McpGateway, log: Logger, caller: Access | (() => Access) = Access.open): Server {
  // A function when the caller's key may change under a live session (/key/update): each request sees it as it is now.
  const accessNow = typeof caller === 'function' ? caller : () => caller;
  const server = new Server(IMPLEMENTATION, { capabilities: CAPABILITIES, instructions: instructions(gateway, accessNow()) });
  const { searchToolName, callToolName } = gateway.settings;
  const feedback = new McpSessionFeedback(gateway.feedback, () => accessNow().scope, log);

  server.setRequestHandler(ListToolsWithQuerySchema, async (request) => {
    const { cursor, query } = request.params ?? {};
    if (cursor !== undefined && typeof cursor !== 'string') throw new McpError(ErrorCode.InvalidParams, 'cursor must be a string');
    if (query !== undefined && typeof query !== 'string') throw new McpError(ErrorCode.InvalidParams, 'query must be a string');
    try {
      return feedback.listed(query, await gateway.listTools({ cursor, query }, accessNow()));
    } catch (error) {
      throw toMcpError(error);
    }
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name, arguments: args } = request.params;
    const access = accessNow();
    feedback.called(gateway.isVirtual(name, access) && name === callToolName ? args?.name : name);
    if (gateway.isVirtual(name, access) && name === searchToolName) return feedback.found(args, await searchTools(gateway, args, access));
    if (gateway.isVirtual(name, access) && name === callToolName) return callThrough(gateway, args, extra.signal, access);
    // A real tool called by name: pinned, or hidden (not listed, still callable).
    if (!gateway.callable(name, access)) {
      if (access.restricted) throw forbidden(`tool "${name}" is not available to this key (${access.describe()})`);
      const hint = gateway.settings.search !== false && access.searchEnabled ? `; use ${searchToolName} to find tools` : '';
      throw new McpError(ErrorCode.InvalidParams, `unknown tool "${name}"${hint}`);
    }
    return forward(gateway, name, args, extra.signal, log, access);
  });

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
    gateway.off('listChanged', onListChanged);
    previousOnClose?.();
  };
  return server;
}

const searchArgs = compileSchema({
  type: 'object',
  properties: { query: { type: 'string', minLength: 1 }, top_k: { type: 'integer', minimum: 1 } },
  required: ['query'],
  additionalProperties: false,
});

async function searchTools(gateway: McpGateway, args: Record<string, unknown> | undefined, access: Access): Promise<CallToolResult> {
  const problems = searchArgs(args ?? {});
  if (problems.length > 0) return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: ${problems.join('; ')}`);
  const { query, top_k: topK } = args as { query: string; top_k?: number };
  if (query.trim().length === 0) return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: /query: must not be blank`);
  if (query.length > gateway.settings.maxQueryLength) {
    return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: /query: must be at most ${gateway.settings.maxQueryLength} characters`);
  }
  try {
    const tools = await gateway.search(query, topK, access);
    return { content: [{ type: 'text', text: JSON.stringify({ tools }) }], structuredContent: { tools } };
  } catch (error) {
    if (error instanceof GatewayError) return errorResult(error.message);
    throw error;
  }
}

const callArgs = compileSchema({
  type: 'object',
  properties: { name: { type: 'string', minLength: 1 }, arguments: { type: 'object' } },
  required: ['name'],
  additionalProperties: false,
});

async function callThrough(gateway: McpGateway, args: Record<string, unknown> | undefined, signal: AbortSignal, access: Access): Promise<CallToolResult> {
  const problems = callArgs(args ?? {});
  if (problems.length > 0) return errorResult(`invalid arguments for ${gateway.settings.callToolName}: ${problems.join('; ')}`);
  const { name, arguments: inner } = args as { name: string; arguments?: Record<string, unknown> };
  try {
    return await gateway.callTool(name, inner, { signal, access });
  } catch (error) {
    // Access is refused as an error, not a result: it is the caller's key, not the model's call, that is wrong.
    if (error instanceof GatewayError && error.kind === 'forbidden') throw forbidden(error.message);
    if (error instanceof GatewayError) return errorResult(error.message);
    throw error;
  }
}

async function forward(
  gateway: McpGateway,
  name: string,
  args: Record<string, unknown> | undefined,
  signal: AbortSignal,
  log: Logger,
  access: Access,
): Promise<CallToolResult> {
  try {
    return await gateway.callTool(name, args, { signal, access });
  } catch (error) {
    if (error instanceof GatewayError && error.kind === 'forbidden') throw forbidden(error.message);
    if (error instanceof GatewayError) return errorResult(error.message);
    log.error({ err: error, tool: name }, 'tool call failed');
    throw error;
  }
}

function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

function forbidden(message: string): McpError {
  return new McpError(ACCESS_DENIED, message, { status: 403 });
}

function toMcpError(error: unknown): unknown {
  if (!(error instanceof GatewayError)) return error;
  if (error.kind === 'forbidden') return forbidden(error.message);
  if (error.kind === 'index_not_ready') return new McpError(ErrorCode.InternalError, error.message);
  return new McpError(ErrorCode.InvalidParams, error.message);
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
    return ['toolrouter aggregates the tools of several MCP servers; tools/list lists all of them.', ...queryFormat].join('\n');
  }
  const { maxTools, maxTokens } = gateway.settings.activation;
  const listing =
    gateway.settings.search === 'auto'
      ? `toolrouter is a gateway to the tools of several MCP servers. While they are few (at most ${maxTools} tools and ${maxTokens} tokens of definitions), tools/list lists all of them; beyond that only a few are listed, with ${search} and ${call} to find and run the others. Each switch is announced with notifications/tools/list_changed; ${search} and ${call} work in both states.`
      : 'toolrouter is a gateway to the tools of several MCP servers. Only a few tools are listed; find the others by search.';
  return [
    listing,
    `1. ${search} {"query": "what you want to do", "top_k": 5} returns the best matching tools with their full definitions.`,
    `2. ${call} {"name": "<tool name>", "arguments": {...}} runs that tool and returns its result unchanged. Any tool may also be called directly by its name.`,
    'Errors in a call (invalid arguments, unknown tool, timeout) come back as a result with isError set and say what to fix.',
    ...queryFormat,
  ].join('\n');
}
