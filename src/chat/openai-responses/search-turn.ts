import { answerText, SseReader, turnReader, type SearchAnswer, type SearchTurn, type SearchTurnReader } from '../core/search-tool.js';

/** The Responses API's side of the proxy's search tool (src/chat/core/search-tool.ts): its shape, its turns, and what follows them. */

/**
 * The search tool's name in Responses native mode: OpenAI's client-executed `tool_search` tool, which has no name of
 * its own. Parentheses cannot appear in a function's name, so no request tool can clash with it.
 */
export const CLIENT_TOOL_SEARCH = '(tool_search)';

export function responsesSearchTool(name: string, description: string, parameters: Record<string, unknown>): Record<string, unknown> {
  if (name === CLIENT_TOOL_SEARCH) return { type: 'tool_search', execution: 'client', description, parameters };
  return { type: 'function', name, description, parameters, strict: false };
}

/** Reads a response (JSON, or its SSE events) for a call of the search tool, and the response's id. */
export function responsesSearchTurnReader(name: string, answer: globalThis.Response): SearchTurnReader | undefined {
  return turnReader(answer, () => new ResponsesStreamReader(name), (json) => responsesTurn(json, name), true);
}

/**
 * The next request: the call items and an output item answering each; a client-executed tool search is answered with
 * the definitions it loads (OpenAI's `tool_search_output`).
 */
export function responsesContinuation(body: Record<string, unknown>, turn: SearchTurn, answers: ReadonlyMap<string, SearchAnswer>): Record<string, unknown> {
  const input = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : ((body.input as unknown[] | undefined) ?? []);
  const results = turn.allCallIds.map((id) => {
    const answer = answers.get(id);
    return Array.isArray(answer) ? { type: 'tool_search_output', call_id: id, execution: 'client', tools: answer } : { type: 'function_call_output', call_id: id, output: answerText(answer) };
  });
  return { ...body, input: [...input, ...turn.items, ...results] };
}

function responsesTurn(json: unknown, name: string): SearchTurn | undefined {
  const output = (json as { output?: unknown } | null)?.output;
  return Array.isArray(output) ? responsesSearchTurn(output as Record<string, unknown>[], name) : undefined;
}

/**
 * The function calls of a response go back into the input as items of their own (without the ids the upstream gave
 * them, which only a stored response could resolve); reasoning and other items stay out for the same reason.
 */
function responsesSearchTurn(output: readonly Record<string, unknown>[], name: string): SearchTurn | undefined {
  const isClientSearch = (item: Record<string, unknown>) => item.type === 'tool_search_call' && item.execution === 'client' && typeof item.call_id === 'string';
  const calls = output.filter((item) => (item.type === 'function_call' && typeof item.call_id === 'string' && typeof item.name === 'string') || isClientSearch(item));
  const search = calls.filter((item) => (name === CLIENT_TOOL_SEARCH ? isClientSearch(item) : item.type === 'function_call' && item.name === name));
  if (search.length === 0) return undefined;
  const args = (item: Record<string, unknown>) => (typeof item.arguments === 'string' ? item.arguments : JSON.stringify(item.arguments ?? {}));
  return {
    calls: search.map((item) => ({ callId: item.call_id as string, arguments: args(item) })),
    allCallIds: calls.map((item) => item.call_id as string),
    items: calls.map((item) =>
      isClientSearch(item)
        ? { type: 'tool_search_call', call_id: item.call_id, execution: 'client', arguments: item.arguments ?? {} }
        : { type: 'function_call', call_id: item.call_id, name: item.name, arguments: item.arguments ?? '' },
    ),
  };
}

/** Responses API events: the first output item that is a message or a function call decides; the final response is read whole. */
class ResponsesStreamReader extends SseReader {
  private output: Record<string, unknown>[] | undefined;

  constructor(private readonly name: string) {
    super();
  }

  protected event(json: Record<string, unknown>): 'hold' | 'pass' {
    if (json.type === 'response.created') {
      const id = (json.response as { id?: unknown } | undefined)?.id;
      if (typeof id === 'string') this.responseId = id;
    } else if (json.type === 'response.output_item.added') {
      const item = json.item as { type?: string; name?: string; execution?: string } | undefined;
      const clientSearch = item?.type === 'tool_search_call' && item.execution === 'client';
      if ((item?.type === 'function_call' && item.name === this.name) || (clientSearch && this.name === CLIENT_TOOL_SEARCH)) this.searching = true;
      else if (item?.type === 'function_call' || item?.type === 'message') return 'pass';
    } else if (json.type === 'response.completed') {
      const output = (json.response as { output?: unknown } | undefined)?.output;
      if (Array.isArray(output)) this.output = output as Record<string, unknown>[];
    }
    return 'hold';
  }

  finish(): SearchTurn | undefined {
    return this.searching && this.output ? responsesSearchTurn(this.output, this.name) : undefined;
  }
}
