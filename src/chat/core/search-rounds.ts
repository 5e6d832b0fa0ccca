import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import type { Access } from '../../auth/access.js';
import type { Metrics } from '../../metrics.js';
import { forwardRequest, type ForwardHooks, type UpstreamSettings } from './proxy.js';
import type { ToolRewriter } from './rewriter.js';
import type { Dialect } from './dialect.js';
import { searchToolDefinition, type SearchAnswer, type SearchCall, type SearchTurn, type SearchTurnReader } from './search-tool.js';
import { toolLabel } from './select.js';
import type { ToolRequest } from './tool-request.js';
import { totalTokens } from '../../search/tokens.js';
import { describeCoverage, serversOfTools } from '../../search/coverage.js';
import { chatSearchCallSpan, llmSpan } from '../../telemetry/spans.js';
import { TOKENS_HEADER, tokensHeader } from '../../telemetry/token-accounting.js';

export interface SearchRoundSettings {
  /** The search tool's name in this request (src/chat/core/search-tool.ts searchToolName). */
  toolName: string;
  /** Search calls answered before the model's turn goes to the caller whatever it is. */
  rounds: number;
  topK: number;
  /** Most tools forwarded, the search tool included. */
  maxTools: number;
  maxQueryLength: number;
  /**
   * Native mode: every tool is already in the request (the ones not kept deferred), so found tools are not added; the
   * answer is what the provider loads them from (Dialect.native.answer: Anthropic's `tool_reference` blocks, OpenAI's
   * definitions in a `tool_search_output`).
   */
  native?: boolean;
}

export interface SearchRoundInput {
  /** The API the request came in: its search tool, turns and continuation. */
  dialect: Dialect;
  req: Request;
  res: Response;
  request: ToolRequest;
  /** The rewritten body and the names of its tools, in order. */
  body: Record<string, unknown>;
  forwarded: readonly string[];
  /** Tools in the request, for the x-toolrouter-tools header. */
  total: number;
  /** Prompt tokens of the request's tool definitions, for the x-toolrouter-tokens header. */
  offeredTokens: number;
  access: Access;
  upstream: UpstreamSettings;
  rewriter: ToolRewriter;
  settings: SearchRoundSettings;
  log: Logger;
  /** The router's metrics (search-tool calls by result); without it nothing is counted. */
  metrics?: Pick<Metrics, 'chatSearchCalls'>;
  /** Shown the answer that goes to the caller (src/chat/core/proxy.ts ForwardHooks). */
  observe?: ForwardHooks<unknown>['observe'];
  /**
   * Files the turn before the caller has the whole answer (ForwardHooks.settle), with the tools forwarded in the call
   * whose answer goes to the caller and that answer's response id (Responses API).
   */
  settle?: (forwarded: readonly string[], responseId: string | undefined) => Promise<void>;
  settleTimeoutMs?: number;
}

export interface SearchRoundResult {
  /** Every tool forwarded in the last upstream call (the search tool not included), in order. */
  forwarded: string[];
  /** Search calls the proxy answered. */
  searches: number;
  /** Prompt tokens of the tool definitions in the last upstream call, the search tool included. */
  tokens: number;
  /** Responses API: the id of the response the caller got. */
  responseId?: string;
}

/**
 * Forwards a trimmed request with the search tool added. A turn in which the model calls it is held back: the proxy
 * searches the request's own tools, adds what it found, appends the call and its answer to the conversation and asks
 * the upstream again. The first turn that is not a search (or any turn after `rounds` searches) goes to the caller
 * untouched, streamed as it comes.
 */
export async function forwardWithSearch(input: SearchRoundInput): Promise<SearchRoundResult> {
  const { dialect, req, res, request, access, upstream, rewriter, settings, log, metrics } = input;
  const api = request.api;
  const tools = [...((input.body.tools as unknown[] | undefined) ?? [])];
  const forwarded = [...input.forwarded];
  const searchTool = searchToolDefinition(dialect, settings.toolName, request.tools);
  let body = input.body;
  let searches = 0;
  let tokens: number;
  // Set by the reader factory, which runs inside forwardRequest.
  const last = {} as { reader?: SearchTurnReader };
  for (let round = 0; ; round++) {
    const intercept = round < settings.rounds;
    res.setHeader('x-toolrouter-tools', `${forwarded.length}/${input.total}`);
    res.setHeader('x-toolrouter-search-calls', String(searches));
    last.reader = undefined;
    const sent = { ...body, tools: [...tools, searchTool] };
    tokens = totalTokens(sent.tools);
    res.setHeader(TOKENS_HEADER, tokensHeader(tokens, input.offeredTokens));
    const hooks: ForwardHooks<SearchTurn> = {
      ...(intercept ? { reader: (answer: globalThis.Response) => (last.reader = dialect.searchTurnReader(settings.toolName, answer)) } : {}),
      ...(input.observe ? { observe: input.observe } : {}),
      ...(input.settle ? { settle: () => input.settle!(forwarded, last.reader?.responseId), settleTimeoutMs: input.settleTimeoutMs } : {}),
    };
    const turn = await llmSpan({ api, model: body.model, url: upstream.url, round }, () => forwardRequest(req, res, JSON.stringify(sent), upstream, log, hooks));
    if (turn === undefined) break;
    const final = round + 1 >= settings.rounds;
    const answers = new Map<string, SearchAnswer>();
    for (const call of turn.calls) {
      searches++;
      const context = { dialect, request, access, rewriter, settings, log, metrics, tools, forwarded, last: final, round };
      answers.set(call.callId, await chatSearchCallSpan({ api, round }, () => answerSearch(call, context)));
    }
    body = dialect.continuation(sent, turn, answers);
  }
  const responseId = (last.reader as SearchTurnReader | undefined)?.responseId;
  return { forwarded, searches, tokens, ...(responseId ? { responseId } : {}) };
}

interface AnswerContext {
  dialect: Dialect;
  request: ToolRequest;
  access: Access;
  rewriter: ToolRewriter;
  settings: SearchRoundSettings;
  log: Logger;
  metrics?: Pick<Metrics, 'chatSearchCalls'>;
  /** Forwarded definitions and their names; found tools are appended to both. */
  tools: unknown[];
  forwarded: string[];
  /** No further search will be answered in this request. */
  last: boolean;
  round: number;
}

/** The tool result the model reads: the tools it may now call, or why there are none. */
async function answerSearch(call: SearchCall, context: AnswerContext): Promise<SearchAnswer> {
  const { dialect, request, access, rewriter, settings, log, metrics, tools, forwarded } = context;
  const api = request.api;
  let args: { query?: unknown; top_k?: unknown } | undefined;
  try {
    args = JSON.parse(call.arguments) as typeof args;
  } catch {
    args = undefined;
  }
  const query = typeof args?.query === 'string' ? args.query.trim().slice(0, settings.maxQueryLength) : '';
  const lastNote = context.last ? ' This was the last tool search for this request: answer with the tools you have.' : '';
  if (query === '') {
    metrics?.chatSearchCalls.inc({ api, result: 'invalid' });
    return JSON.stringify({ error: `Call ${settings.toolName} with {"query": "<what the tool should do>"}.${lastNote}` });
  }
  const asked = typeof args?.top_k === 'number' && Number.isInteger(args.top_k) ? args.top_k : settings.topK;
  // Native mode adds no definitions, so the cap does not bound what a search finds.
  const room = settings.native ? Number.POSITIVE_INFINITY : settings.maxTools - 1 - tools.length;
  const topK = Math.max(0, Math.min(asked, settings.topK, room));
  let found: ReturnType<typeof toolSummary>[];
  let hits: Awaited<ReturnType<ToolRewriter['findRequestTools']>>;
  try {
    hits = topK > 0 ? await rewriter.findRequestTools(request, query, topK, new Set(forwarded), access) : [];
    for (const tool of hits) {
      if (!settings.native) tools.push(tool.definition);
      forwarded.push(toolLabel(tool));
    }
    found = hits.map(toolSummary);
  } catch (error) {
    metrics?.chatSearchCalls.inc({ api, result: 'error' });
    log.warn({ err: error, api, query }, 'search tool call failed');
    return JSON.stringify({ error: `The tool search failed; continue with the tools you have.${lastNote}` });
  }
  metrics?.chatSearchCalls.inc({ api, result: found.length > 0 ? 'found' : 'empty' });
  log.info({ api, round: context.round, query, found: found.map((tool) => tool.name) }, 'search tool answered');
  // Native mode: what the provider loads the deferred tools from.
  if (settings.native && found.length > 0 && dialect.native) return dialect.native.answer(hits);
  // Nothing found with room left means nothing reached min_score: say so, and what was searched, so the model tells
  // the user this cannot be done here instead of trying other words round after round.
  const note =
    found.length > 0
      ? 'These tools are now available: call them directly.'
      : room <= 0
        ? 'No more tools can be added to this request.'
        : `No tool fits "${query}". ${coverageSentence(request.tools)}Continue with the tools you have, or tell the user this cannot be done with them.`;
  return JSON.stringify({ tools: found, note: note + lastNote });
}

/** What the search covered, in one line (servers by name and tool count), or nothing for an unnamespaced list. */
function coverageSentence(tools: ToolRequest['tools']): string {
  const servers = serversOfTools(tools.map((tool) => ({ name: toolLabel(tool) })), '__');
  if (servers.length === 0 || (servers.length === 1 && servers[0]!.name === '(no server)')) return `Searched ${tools.length} tools. `;
  return `${describeCoverage(servers, COVERAGE_SENTENCE_TOKENS)} `;
}

/** Bound on the coverage sentence in an abstaining answer (o200k_base tokens): a line, not the description's list. */
const COVERAGE_SENTENCE_TOKENS = 80;

function toolSummary(tool: { function?: { name: string; description?: string | null } }): { name: string; description?: string } {
  const description = tool.function?.description ?? undefined;
  return { name: tool.function!.name, ...(description ? { description: description.slice(0, 300) } : {}) };
}
