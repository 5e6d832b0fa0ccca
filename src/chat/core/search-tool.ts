import { describeCoverage, serversOfTools } from '../../search/coverage.js';
import { toolLabel } from './select.js';
import { isEventStream, SseJsonReader } from './sse.js';
import type { TurnReader } from './proxy.js';
import type { Api, RequestTool } from './tool-request.js';

/**
 * The proxy's search tool: trimmed requests carry one extra function tool through which the model asks for tools that
 * were left out. The proxy answers those calls itself and asks the upstream again; the caller never sees them. This
 * module knows the tool's shape in both APIs, how to recognise a turn that calls it (streamed or not), and how the
 * conversation continues after it.
 */

const DESCRIPTION =
  'Find more tools. Only the tools that looked relevant are listed; when none of them fits what you need to do, call ' +
  'this with a short description of the task, and the tools that match become available for your next step.';

const PARAMETERS = {
  type: 'object',
  properties: {
    query: { type: 'string', description: 'What the tool should do, in a few words.' },
    top_k: { type: 'integer', minimum: 1, maximum: 50, description: 'How many tools to add (default 5).' },
  },
  required: ['query'],
  additionalProperties: false,
};

/** The configured name, or `<name>_2`, `<name>_3`... when the request already has a tool of that name. */
export function searchToolName(tools: readonly RequestTool[], configured: string): string {
  const taken = new Set(tools.map(toolLabel));
  if (!taken.has(configured)) return configured;
  for (let suffix = 2; ; suffix++) if (!taken.has(`${configured}_${suffix}`)) return `${configured}_${suffix}`;
}

/**
 * The search tool's name in Responses native mode: OpenAI's client-executed `tool_search` tool, which has no name of
 * its own. Parentheses cannot appear in a function's name, so no request tool can clash with it.
 */
export const CLIENT_TOOL_SEARCH = '(tool_search)';

/** @param tools the request's tools: the description names their servers (by `server__` prefix) and counts. */
export function searchToolDefinition(api: Api, name: string, tools: readonly RequestTool[] = []): Record<string, unknown> {
  const covers = describeCoverage(serversOfTools(tools.map((tool) => ({ name: toolLabel(tool) })), '__'));
  const description = covers === '' ? DESCRIPTION : `${DESCRIPTION}
${covers}`;
  if (name === CLIENT_TOOL_SEARCH) return { type: 'tool_search', execution: 'client', description, parameters: PARAMETERS };
  if (api === 'anthropic') return { name, description, input_schema: PARAMETERS };
  return api === 'chat'
    ? { type: 'function', function: { name, description, parameters: PARAMETERS } }
    : { type: 'function', name, description, parameters: PARAMETERS, strict: false };
}

/** One call of the search tool by the model. */
export interface SearchCall {
  callId: string;
  arguments: string;
}

/** A turn in which the model called the search tool. */
export interface SearchTurn {
  calls: SearchCall[];
  /** Every call of that turn (some may be of other tools), to answer each. */
  allCallIds: string[];
  /** What to append to the conversation before the answers: the assistant message, or the Responses output items. */
  items: Record<string, unknown>[];
}

/**
 * The content of a search call's answer. A string (the found tools as JSON, which the model reads), or for Anthropic's
 * native mode content blocks (`tool_reference` blocks, which the provider expands into the deferred tools' definitions).
 */
export type SearchAnswer = string | Record<string, unknown>[];

export interface SearchTurnReader extends TurnReader<SearchTurn> {
  /** Responses API: the id of the upstream's response, once read (sticky selection files the turn under it). */
  readonly responseId?: string;
}

/** Reads an upstream answer (JSON or SSE, by its content type) for a call of the search tool. */
export function searchTurnReader(api: Api, name: string, answer: globalThis.Response): SearchTurnReader | undefined {
  const type = answer.headers.get('content-type') ?? '';
  if (isEventStream(answer)) return api === 'chat' ? new ChatStreamReader(name) : api === 'anthropic' ? new AnthropicStreamReader(name) : new ResponsesStreamReader(name);
  const read = { chat: chatTurn, responses: responsesTurn, anthropic: anthropicTurn }[api];
  if (type.includes('json')) return new JsonReader((json) => read(json, name), api === 'responses');
  return undefined;
}

/** The request body for the next upstream call: the turn and its answers appended to the conversation. */
export function continuation(api: Api, body: Record<string, unknown>, turn: SearchTurn, answers: ReadonlyMap<string, SearchAnswer>): Record<string, unknown> {
  if (api === 'anthropic') {
    // Every tool_use of the turn gets its tool_result, in one user message right after it (the API requires both).
    const results = turn.allCallIds.map((id) => ({ type: 'tool_result', tool_use_id: id, content: answers.get(id) ?? NOT_RUN }));
    return { ...body, messages: [...(body.messages as unknown[]), ...turn.items, { role: 'user', content: results }] };
  }
  if (api === 'chat') {
    const results = turn.allCallIds.map((id) => ({ role: 'tool', tool_call_id: id, content: textOf(answers.get(id)) }));
    return { ...body, messages: [...(body.messages as unknown[]), ...turn.items, ...results] };
  }
  const input = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : ((body.input as unknown[] | undefined) ?? []);
  // A client-executed tool search is answered with the definitions it loads (OpenAI's tool_search_output).
  const results = turn.allCallIds.map((id) => {
    const answer = answers.get(id);
    return Array.isArray(answer) ? { type: 'tool_search_output', call_id: id, execution: 'client', tools: answer } : { type: 'function_call_output', call_id: id, output: textOf(answer) };
  });
  return { ...body, input: [...input, ...turn.items, ...results] };
}

/** The answer to a call made in the same turn as a search: the proxy cannot run the caller's tools. */
const NOT_RUN = 'Not run: this call came together with a tool search. Call it again if it is still needed.';

const textOf = (answer: SearchAnswer | undefined) => (answer === undefined ? NOT_RUN : typeof answer === 'string' ? answer : JSON.stringify(answer));

/**
 * An Anthropic message's content: the assistant turn goes back as it came, every block kept (thinking blocks with
 * their signatures must be, for the model to go on after a tool result).
 */
function anthropicTurn(json: unknown, name: string): SearchTurn | undefined {
  const content = (json as { content?: unknown } | null)?.content;
  return Array.isArray(content) ? anthropicSearchTurn(content as Record<string, unknown>[], name) : undefined;
}

function anthropicSearchTurn(content: readonly Record<string, unknown>[], name: string): SearchTurn | undefined {
  const calls = content.filter((block) => block.type === 'tool_use' && typeof block.id === 'string');
  const search = calls.filter((block) => block.name === name);
  if (search.length === 0) return undefined;
  return {
    calls: search.map((block) => ({ callId: block.id as string, arguments: JSON.stringify(block.input ?? {}) })),
    allCallIds: calls.map((block) => block.id as string),
    items: [{ role: 'assistant', content }],
  };
}

function chatTurn(json: unknown, name: string): SearchTurn | undefined {
  const message = (json as { choices?: { message?: Record<string, unknown> }[] } | null)?.choices?.[0]?.message;
  const calls = (message?.tool_calls ?? []) as { id?: string; function?: { name?: string; arguments?: string } }[];
  return chatSearchTurn(typeof message?.content === 'string' ? message.content : null, calls, name);
}

function chatSearchTurn(content: string | null, calls: readonly { id?: string; function?: { name?: string; arguments?: string } }[], name: string): SearchTurn | undefined {
  const search = calls.filter((call) => call.function?.name === name);
  if (search.length === 0 || calls.some((call) => typeof call.id !== 'string' || typeof call.function?.name !== 'string')) return undefined;
  return {
    calls: search.map((call) => ({ callId: call.id!, arguments: call.function?.arguments ?? '' })),
    allCallIds: calls.map((call) => call.id!),
    items: [
      {
        role: 'assistant',
        content,
        tool_calls: calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.function!.name, arguments: call.function?.arguments ?? '' } })),
      },
    ],
  };
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

/** A JSON answer is held whole and read once it has all come. */
class JsonReader implements SearchTurnReader {
  private readonly chunks: Uint8Array[] = [];
  responseId?: string;
  constructor(
    private readonly read: (json: unknown) => SearchTurn | undefined,
    private readonly response: boolean,
  ) {}
  push(chunk: Uint8Array): 'hold' {
    this.chunks.push(chunk);
    return 'hold';
  }
  finish(): SearchTurn | undefined {
    let json: unknown;
    try {
      json = JSON.parse(Buffer.concat(this.chunks).toString('utf8'));
    } catch {
      return undefined;
    }
    const id = (json as { id?: unknown } | null)?.id;
    if (this.response && typeof id === 'string') this.responseId = id;
    return this.read(json);
  }
}

/** Reads SSE bytes as events (src/chat/sse.ts) and decides, event by event, whether the turn is a search. */
abstract class SseReader implements SearchTurnReader {
  responseId?: string;
  private readonly events = new SseJsonReader((event) => {
    if (this.event(event.data) === 'pass' && !this.searching) this.passed = true;
  });
  private passed = false;
  /** The search tool is being called: hold the turn to its end. */
  protected searching = false;

  push(chunk: Uint8Array): 'hold' | 'pass' {
    this.events.push(chunk);
    return this.passed ? 'pass' : 'hold';
  }

  /** `pass` when this event shows the turn is not a search (only heeded before a search call was seen). */
  protected abstract event(json: Record<string, unknown>): 'hold' | 'pass';
  abstract finish(): SearchTurn | undefined;
}

/** Chat completion chunks: the first content or the first named tool call decides. */
class ChatStreamReader extends SseReader {
  private content = '';
  private readonly calls: { id?: string; function: { name?: string; arguments: string } }[] = [];

  constructor(private readonly name: string) {
    super();
  }

  protected event(json: Record<string, unknown>): 'hold' | 'pass' {
    const delta = (json.choices as { delta?: Record<string, unknown> }[] | undefined)?.[0]?.delta;
    if (!delta) return 'hold';
    let verdict: 'hold' | 'pass' = 'hold';
    if (typeof delta.content === 'string' && delta.content !== '') {
      this.content += delta.content;
      verdict = 'pass';
    }
    if (typeof delta.refusal === 'string' && delta.refusal !== '') verdict = 'pass';
    for (const part of (delta.tool_calls ?? []) as { index?: number; id?: string; function?: { name?: string; arguments?: string } }[]) {
      const call = (this.calls[part.index ?? 0] ??= { function: { arguments: '' } });
      if (part.id) call.id = part.id;
      if (part.function?.name) {
        call.function.name = part.function.name;
        if (part.function.name === this.name && verdict === 'hold') this.searching = true;
        else if (!this.searching) verdict = 'pass';
      }
      if (part.function?.arguments) call.function.arguments += part.function.arguments;
    }
    return verdict;
  }

  finish(): SearchTurn | undefined {
    if (!this.searching) return undefined;
    return chatSearchTurn(this.content === '' ? null : this.content, this.calls.filter(Boolean), this.name);
  }
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

/**
 * Anthropic Messages events: the first text or the first call of another tool decides; the content blocks are rebuilt
 * from their deltas (text, tool input JSON, thinking and its signature) to send the assistant turn back whole.
 */
class AnthropicStreamReader extends SseReader {
  private readonly blocks: Record<string, unknown>[] = [];
  private readonly inputs = new Map<number, string>();

  constructor(private readonly name: string) {
    super();
  }

  protected event(json: Record<string, unknown>): 'hold' | 'pass' {
    const index = typeof json.index === 'number' ? json.index : -1;
    if (json.type === 'content_block_start') {
      const block = { ...(json.content_block as Record<string, unknown>) };
      this.blocks[index] = block;
      if (block.type === 'tool_use') {
        this.inputs.set(index, '');
        if (block.name === this.name) this.searching = true;
        else return 'pass';
      }
      if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') return 'pass';
    } else if (json.type === 'content_block_delta') {
      const block = this.blocks[index];
      const delta = json.delta as Record<string, unknown> | undefined;
      if (!block || !delta) return 'hold';
      if (delta.type === 'text_delta' && typeof delta.text === 'string') {
        block.text = `${(block.text as string | undefined) ?? ''}${delta.text}`;
        if (delta.text !== '') return 'pass';
      } else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') {
        this.inputs.set(index, (this.inputs.get(index) ?? '') + delta.partial_json);
      } else if (delta.type === 'thinking_delta' && typeof delta.thinking === 'string') {
        block.thinking = `${(block.thinking as string | undefined) ?? ''}${delta.thinking}`;
      } else if (delta.type === 'signature_delta' && typeof delta.signature === 'string') {
        block.signature = delta.signature;
      }
    }
    return 'hold';
  }

  finish(): SearchTurn | undefined {
    if (!this.searching) return undefined;
    const content = this.blocks.flatMap((block, index) => {
      if (!block) return [];
      if (block.type !== 'tool_use') return [block];
      return [{ ...block, input: parseInput(this.inputs.get(index) ?? '') }];
    });
    return anthropicSearchTurn(content, this.name);
  }
}

/** A streamed tool_use's input, from its JSON deltas; a malformed one is read as no arguments. */
function parseInput(text: string): unknown {
  try {
    return text === '' ? {} : JSON.parse(text);
  } catch {
    return {};
  }
}
