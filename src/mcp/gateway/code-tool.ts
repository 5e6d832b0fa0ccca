/**
 * Code mode on the MCP face: the `execute` virtual tool and the ToolHost its code reaches. Every call from code takes
 * the path a direct tools/call takes (`direct` below is the face's own tools/call handler, run with the caller's
 * Access, cancellation and progress token), so code reaches exactly the tools its caller could call, through the same
 * checks, transforms, spans and feedback; searches rank what the caller may see, as search_tools does.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Metrics } from '../../metrics.js';
import type { Access } from '../../auth/access.js';
import { RateLimitedError } from '../../auth/rate-limit.js';
import type { Tool } from '../../catalog/types.js';
import { ToolCallFailure, type SearchDetail, type SearchOptions, type ToolHost } from '../../codemode/host.js';
import type { Execution, Sandbox } from '../../codemode/sandbox.js';
import { codeTool } from '../../codemode/signatures.js';
import { briefTool } from '../../search/coverage.js';
import { SELECT_PREFIX } from '../../search/search.js';
import { GatewayError, type CodeModeListing, type McpGateway, type ScoredTool } from './gateway.js';

export interface CodeToolOptions {
  /** mcp.codeMode: whether callers get `execute` unless their key says otherwise. */
  enabled: boolean;
  /** mcp.executeToolName. */
  toolName: string;
  sandbox: Sandbox;
  /** Counts a call against the caller's key limit, as the direct call's own request would be (Auth.countRequest). */
  countRequest?: (access: Access) => Promise<void>;
  /** Executions by outcome, their wall time and calls; without it nothing is counted. */
  metrics?: Metrics;
}

/** What the execute handler needs of the face that received the call. */
export interface ExecuteContext {
  access: Access;
  signal: AbortSignal;
  /** The face's tools/call for a real tool, exactly as a direct call from this caller would run. */
  direct(name: string, args: Record<string, unknown>): Promise<CallToolResult>;
  /** Tells the feedback ledger of a search (as search_tools does), so a following call pairs with it. */
  searched?(query: string, tools: readonly { name: string }[]): void;
}

export class CodeTool implements CodeModeListing {
  constructor(
    private readonly gateway: McpGateway,
    private readonly options: CodeToolOptions,
  ) {}

  get name(): string {
    return this.options.toolName;
  }

  get sandbox(): Sandbox {
    return this.options.sandbox;
  }

  /** A call from code counts against the caller's `rpm_limit` like a direct tools/call request. */
  async countRequest(access: Access): Promise<void> {
    try {
      await this.options.countRequest?.(access);
    } catch (error) {
      if (error instanceof RateLimitedError) throw new ToolCallFailure(error.message, 'rate_limited');
      throw error;
    }
  }

  /** The key's own setting when it has one, else mcp.codeMode. */
  enabledFor(access: Access): boolean {
    return access.codeModeEnabled ?? this.options.enabled;
  }

  tool(access: Access): Tool {
    const { searchToolName } = this.gateway.settings;
    const { timeoutMs, maxCalls, memoryMb, maxOutputBytes } = this.options.sandbox.settings;
    const search = access.searchEnabled
      ? ` \`await search_tools(query, {top_k?, detail?})\` finds tools (the same ranking as ${searchToolName}) and answers with each tool's TypeScript signature (detail "code"; "brief" and "full" as in ${searchToolName});`
      : '';
    return {
      name: this.options.toolName,
      title: 'Run code over the tools',
      description:
        `Run a JavaScript program that calls tools, in one step: the code is the body of an async function. Inside it, ` +
        `\`await call_tool(name, arguments)\` calls a tool and returns its structuredContent, or its text when it has none ` +
        `(a tool error throws an Error with .message, .code and .result: catch it to recover);${search} ` +
        '`console.log(...)` is captured. Return a JSON-serialisable value: it and the captured log are the result. Combine, ' +
        'filter and summarise in the code so that only what you need comes back. ' +
        `No network, files, timers, require or import; limits per run: ${timeoutMs / 1000} s, ${memoryMb} MB, ${maxCalls} calls, ` +
        `${maxOutputBytes} bytes of result.`,
      inputSchema: {
        type: 'object',
        properties: {
          code: {
            type: 'string',
            minLength: 1,
            maxLength: this.options.sandbox.settings.maxCodeBytes,
            description: 'Body of an async function, e.g. `const a = await call_tool("srv__get", {id: 1}); return a.title;`',
          },
        },
        required: ['code'],
        additionalProperties: false,
      },
      outputSchema: {
        type: 'object',
        properties: {
          result: { description: 'The return value of the code' },
          logs: { type: 'array', items: { type: 'string' }, description: 'What the code wrote with console.log' },
          calls: { type: 'integer', description: 'Tool calls and searches the code made' },
        },
        required: ['result', 'logs', 'calls'],
      },
      annotations: { openWorldHint: true },
    };
  }

  /** tools/call of `execute`: runs the code and answers with its value and log (or the error that ended it). */
  async execute(args: Record<string, unknown> | undefined, context: ExecuteContext): Promise<CallToolResult> {
    const code = args?.code;
    const extra = args ? Object.keys(args).filter((key) => key !== 'code') : [];
    if (typeof code !== 'string' || code.trim() === '' || extra.length > 0) {
      return errorResult(`invalid arguments for ${this.name}: ${extra.length > 0 ? `unknown argument(s) ${extra.join(', ')}` : '"code" must be a non-empty string'}`);
    }
    const host = new GatewayToolHost(this.gateway, this, context);
    const owner = context.access.key?.keyId ?? context.access.kind;
    const execution = await this.options.sandbox.run(code, host, { owner, signal: context.signal });
    const { metrics } = this.options;
    if (metrics) {
      metrics.codeExecutions.inc({ outcome: execution.ok ? 'ok' : execution.error.code });
      metrics.codeExecutionDuration.observe(execution.ms / 1000);
      metrics.codeExecutionCalls.observe(execution.calls);
    }
    return executionResult(execution);
  }
}

/** The tool result of one execution. */
export function executionResult(execution: Execution): CallToolResult {
  const log = execution.logs.length === 0 ? [] : [{ type: 'text' as const, text: `console:\n${execution.logs.join('\n')}` }];
  if (!execution.ok) {
    return {
      content: [{ type: 'text', text: `${execution.error.code}: ${execution.error.message}` }, ...log],
      isError: true,
      _meta: { 'toolrouter/execution': { code: execution.error.code, calls: execution.calls, ms: execution.ms } },
    };
  }
  return {
    content: [{ type: 'text', text: JSON.stringify(execution.value) }, ...log],
    structuredContent: { result: execution.value, logs: execution.logs, calls: execution.calls },
    _meta: { 'toolrouter/execution': { calls: execution.calls, ms: execution.ms } },
  };
}

/** JSON-RPC codes the direct path raises, as the codes code sees on the error it catches. */
const RPC_CODES: Record<number, string> = { [-32003]: 'forbidden', [-32602]: 'invalid_request', [-32042]: 'authorization_required' };

/** ToolHost over the gateway, for one caller's execution. */
class GatewayToolHost implements ToolHost {
  constructor(
    private readonly gateway: McpGateway,
    private readonly code: CodeTool,
    private readonly context: ExecuteContext,
  ) {}

  async call(name: string, args: Record<string, unknown>): Promise<unknown> {
    const { access } = this.context;
    if (this.gateway.isVirtual(name, access) || (name === this.code.name && this.code.enabledFor(access))) {
      throw new ToolCallFailure(`"${name}" is one of toolrouter's own tools; code calls real tools by name`, 'recursion');
    }
    await this.code.countRequest(access);
    let result: CallToolResult;
    try {
      result = await this.context.direct(name, args);
    } catch (error) {
      // The direct path answers a tool the key may not use, or no tool of that name, with a JSON-RPC error.
      const code = (error as { code?: unknown }).code;
      const message = error instanceof Error ? error.message : String(error);
      // Governance refusals carry their own code (policy_denied, guardrail_blocked, ...) in the error's data.
      const named = (error as { data?: { code?: unknown } }).data?.code;
      throw new ToolCallFailure(message, typeof named === 'string' ? named : typeof code === 'number' ? (RPC_CODES[code] ?? 'error') : 'error');
    }
    const value = valueOf(result);
    if (result.isError) throw new ToolCallFailure(textOf(result) || `${name} failed`, 'tool_error', value);
    return value;
  }

  async search(query: string, options: SearchOptions): Promise<unknown> {
    const { access } = this.context;
    if (!access.searchEnabled) throw new ToolCallFailure('tool search is disabled for this key', 'forbidden');
    const trimmed = query.trim();
    if (trimmed === '' || query.length > this.gateway.settings.maxQueryLength) {
      throw new ToolCallFailure(`search_tools: query must be 1 to ${this.gateway.settings.maxQueryLength} characters`, 'invalid_request');
    }
    const topK = options.top_k;
    if (topK !== undefined && (!Number.isInteger(topK) || topK < 1)) throw new ToolCallFailure('search_tools: top_k must be a positive integer', 'invalid_request');
    const detail: SearchDetail = options.detail ?? 'code';
    if (!['code', 'brief', 'full'].includes(detail)) throw new ToolCallFailure('search_tools: detail must be "code", "brief" or "full"', 'invalid_request');
    try {
      await this.gateway.startup();
      const { tools } = await this.gateway.searchCounted(query, topK, access, { surface: 'code' });
      this.gateway.tokens?.served(access, tools);
      this.context.searched?.(query, tools);
      return tools.map((tool) => searchDetail(tool, detail, trimmed));
    } catch (error) {
      if (error instanceof GatewayError) throw new ToolCallFailure(error.message, error.code);
      throw error;
    }
  }
}

/** A search hit in the asked detail; `select:` always gives full definitions (it is how they are fetched). */
export function searchDetail(tool: ScoredTool, detail: SearchDetail, query: string): unknown {
  const { score, scores: _scores, ...definition } = tool;
  if (query.toLowerCase().startsWith(SELECT_PREFIX) || detail === 'full') return { ...definition, score };
  if (detail === 'brief') return { ...briefTool(definition), score };
  return { ...codeTool(definition), score };
}

/** A tool's value for code: its structuredContent, else its text (non-text blocks named, not inlined). */
function valueOf(result: CallToolResult): unknown {
  if (result.structuredContent !== undefined) return result.structuredContent;
  return textOf(result);
}

function textOf(result: CallToolResult): string {
  return (result.content ?? [])
    .map((block) => (block.type === 'text' ? block.text : `[${block.type}${'mimeType' in block && block.mimeType ? ` ${String(block.mimeType)}` : ''}]`))
    .join('\n');
}

function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}
