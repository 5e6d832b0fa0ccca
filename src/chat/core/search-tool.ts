import { describeCoverage, serversOfTools } from '../../search/coverage.js';
import { toolLabel } from './select.js';
import { isEventStream, SseJsonReader } from './sse.js';
import type { TurnReader } from './proxy.js';
import type { RequestTool } from './tool-request.js';

/**
 * The proxy's search tool: trimmed requests carry one extra function tool through which the model asks for tools that
 * were left out. The proxy answers those calls itself and asks the upstream again; the caller never sees them. This
 * module holds what every API shares: the tool's name, description and parameters, the shape of a turn that calls it,
 * and the readers a dialect builds its own on (each dialect's search-turn.ts knows its API's shapes).
 */

const DESCRIPTION =
  'Find more tools. Only the tools that looked relevant are listed; when none of them fits what you need to do, call ' +
  'this with a short description of the task, and the tools that match become available for your next step.';

/** The search tool's parameters, the same JSON Schema in every API. */
export const SEARCH_PARAMETERS = {
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

/** What renders the search tool in one API's format: a Dialect (src/chat/core/dialect.ts). */
export interface SearchToolRenderer {
  searchTool(name: string, description: string, parameters: Record<string, unknown>): Record<string, unknown>;
}

/**
 * The search tool in the dialect's format.
 * @param tools the request's tools: the description names their servers (by `server__` prefix) and counts.
 */
export function searchToolDefinition(dialect: SearchToolRenderer, name: string, tools: readonly RequestTool[] = []): Record<string, unknown> {
  const covers = describeCoverage(serversOfTools(tools.map((tool) => ({ name: toolLabel(tool) })), '__'));
  const description = covers === '' ? DESCRIPTION : `${DESCRIPTION}
${covers}`;
  return dialect.searchTool(name, description, SEARCH_PARAMETERS);
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
 * The content of a search call's answer. A string (the found tools as JSON, which the model reads), or in native mode
 * what the provider loads the found tools from (Anthropic: `tool_reference` blocks; OpenAI: their definitions).
 */
export type SearchAnswer = string | Record<string, unknown>[];

export interface SearchTurnReader extends TurnReader<SearchTurn> {
  /** Responses API: the id of the upstream's response, once read (sticky selection files the turn under it). */
  readonly responseId?: string;
}

/**
 * Reads an upstream answer for a call of the search tool, by its content type: SSE event by event with the dialect's
 * stream reader, JSON whole with `fromJson`. `responseId`: the JSON answer's `id` is the response's (Responses API).
 */
export function turnReader(
  answer: globalThis.Response,
  stream: () => SearchTurnReader,
  fromJson: (json: unknown) => SearchTurn | undefined,
  responseId = false,
): SearchTurnReader | undefined {
  const type = answer.headers.get('content-type') ?? '';
  if (isEventStream(answer)) return stream();
  if (type.includes('json')) return new JsonReader(fromJson, responseId);
  return undefined;
}

/** The answer to a call made in the same turn as a search: the proxy cannot run the caller's tools. */
export const NOT_RUN = 'Not run: this call came together with a tool search. Call it again if it is still needed.';

/** A search call's answer as text (a tool result's content), or NOT_RUN for a call the proxy did not answer. */
export const answerText = (answer: SearchAnswer | undefined): string => (answer === undefined ? NOT_RUN : typeof answer === 'string' ? answer : JSON.stringify(answer));

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

/** Reads SSE bytes as events (src/chat/core/sse.ts) and decides, event by event, whether the turn is a search. */
export abstract class SseReader implements SearchTurnReader {
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
