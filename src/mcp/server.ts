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
import { compileSchema } from '../catalog/json-schema.js';
import { GatewayError, type McpGateway } from './gateway.js';
import { IMPLEMENTATION } from './version.js';

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
export function createMcpServer(gateway: McpGateway, log: Logger): Server {
  const server = new Server(IMPLEMENTATION, { capabilities: CAPABILITIES, instructions: instructions(gateway) });
  const { searchToolName, callToolName } = gateway.settings;

  server.setRequestHandler(ListToolsWithQuerySchema, async (request) => {
    const { cursor, query } = request.params ?? {};
    if (cursor !== undefined && typeof cursor !== 'string') throw new McpError(ErrorCode.InvalidParams, 'cursor must be a string');
    if (query !== undefined && typeof query !== 'string') throw new McpError(ErrorCode.InvalidParams, 'query must be a string');
    try {
      return await gateway.listTools({ cursor, query });
    } catch (error) {
      throw toMcpError(error);
    }
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name, arguments: args } = request.params;
    if (gateway.isVirtual(name) && name === searchToolName) return searchTools(gateway, args);
    if (gateway.isVirtual(name) && name === callToolName) return callThrough(gateway, args, extra.signal);
    // A real tool called by name: pinned, or hidden (not listed, still callable).
    if (!gateway.callable(name)) {
      throw new McpError(ErrorCode.InvalidParams, `unknown tool "${name}"${gateway.settings.search ? `; use ${searchToolName} to find tools` : ''}`);
    }
    return forward(gateway, name, args, extra.signal, log);
  });

  // Tell this client when its unfiltered tool list changed. Removed when the connection closes.
  const onListChanged = () => {
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

async function searchTools(gateway: McpGateway, args: Record<string, unknown> | undefined): Promise<CallToolResult> {
  const problems = searchArgs(args ?? {});
  if (problems.length > 0) return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: ${problems.join('; ')}`);
  const { query, top_k: topK } = args as { query: string; top_k?: number };
  if (query.trim().length === 0) return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: /query: must not be blank`);
  if (query.length > gateway.settings.maxQueryLength) {
    return errorResult(`invalid arguments for ${gateway.settings.searchToolName}: /query: must be at most ${gateway.settings.maxQueryLength} characters`);
  }
  try {
    const tools = await gateway.search(query, topK);
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

async function callThrough(gateway: McpGateway, args: Record<string, unknown> | undefined, signal: AbortSignal): Promise<CallToolResult> {
  const problems = callArgs(args ?? {});
  if (problems.length > 0) return errorResult(`invalid arguments for ${gateway.settings.callToolName}: ${problems.join('; ')}`);
  const { name, arguments: inner } = args as { name: string; arguments?: Record<string, unknown> };
  try {
    return await gateway.callTool(name, inner, { signal });
  } catch (error) {
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
): Promise<CallToolResult> {
  try {
    return await gateway.callTool(name, args, { signal });
  } catch (error) {
    if (error instanceof GatewayError) return errorResult(error.message);
    log.error({ err: error, tool: name }, 'tool call failed');
    throw error;
  }
}

function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

function toMcpError(error: unknown): unknown {
  if (!(error instanceof GatewayError)) return error;
  if (error.kind === 'index_not_ready') return new McpError(ErrorCode.InternalError, error.message);
  return new McpError(ErrorCode.InvalidParams, error.message);
}

/** Sent at initialization; clients may put it in the model's context, so it says how to use the gateway, briefly. */
export function instructions(gateway: McpGateway): string {
  const { searchToolName: search, callToolName: call, queryLimit } = gateway.settings;
  const queryFormat = [
    'Query format (the same everywhere):',
    '- plain words describing the task, ranked by keyword and meaning: "send an email", "list open pull requests"',
    '- "select:name1,name2" returns exactly those tools by name',
    '- "regex:<pattern>" matches tool names and descriptions with an RE2 regular expression, e.g. "regex:^github__"',
    `SEP-1821: tools/list accepts params.query in this format and returns the matching tools of the whole catalog (at most ${queryLimit}, best first, paginated with nextCursor), e.g. {"method": "tools/list", "params": {"query": "read a file"}}.`,
  ];
  if (!gateway.settings.search) {
    return ['toolrouter aggregates the tools of several MCP servers; tools/list lists all of them.', ...queryFormat].join('\n');
  }
  return [
    'toolrouter is a gateway to the tools of several MCP servers. Only a few tools are listed; find the others by search.',
    `1. ${search} {"query": "what you want to do", "top_k": 5} returns the best matching tools with their full definitions.`,
    `2. ${call} {"name": "<tool name>", "arguments": {...}} runs that tool and returns its result unchanged. Any tool may also be called directly by its name.`,
    'Errors in a call (invalid arguments, unknown tool, timeout) come back as a result with isError set and say what to fix.',
    ...queryFormat,
  ].join('\n');
}
