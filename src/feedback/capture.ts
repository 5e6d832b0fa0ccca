import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { contentText } from '../chat/query.js';
import type { ChatRequest } from '../chat/request.js';
import type { ToolRequest } from '../chat/tool-request.js';
import type { FeedbackRecorder } from './service.js';
import type { FeedbackSurface } from './types.js';

/** Queries in these forms name tools or patterns; a call after them says nothing about what words mean. */
const NOT_PROSE = /^\s*(select|regex):/i;

/** Searches an MCP session remembers; an agent calls what it found within the next few steps or not at all. */
const SESSION_SEARCHES = 16;

function recordQuietly(
  recorder: FeedbackRecorder,
  log: Logger | undefined,
  input: { query: string; tool: string; scope: string | undefined; surface: FeedbackSurface },
): void {
  // A call or completion must never fail because its feedback could not be stored.
  recorder.record({ ...input, relevant: true }).catch((error: unknown) => log?.warn({ err: error, tool: input.tool }, 'feedback event not recorded'));
}

/**
 * One MCP session's evidence: a `search_tools` (or SEP-1821 `tools/list` query) result, then a call of one of the
 * returned tools (through `call_tool` or directly), is an event for that search's query. Each search counts a tool once.
 */
export class McpSessionFeedback {
  private readonly searches: { query: string; tools: Set<string>; recorded: Set<string> }[] = [];

  constructor(
    private readonly recorder: FeedbackRecorder | undefined,
    /** The session's caller scope (an API key id), read when an event is recorded. */
    private readonly scope: () => string | undefined = () => undefined,
    private readonly log?: Logger,
  ) {}

  searched(query: string, tools: readonly { name: string }[]): void {
    if (!this.recorder || NOT_PROSE.test(query) || tools.length === 0) return;
    this.searches.push({ query, tools: new Set(tools.map((tool) => tool.name)), recorded: new Set() });
    if (this.searches.length > SESSION_SEARCHES) this.searches.shift();
  }

  /** A `search_tools` call's arguments and result, passed through. */
  found<T extends { isError?: boolean; structuredContent?: Record<string, unknown> }>(args: Record<string, unknown> | undefined, result: T): T {
    const tools = result.structuredContent?.tools;
    if (!result.isError && typeof args?.query === 'string' && Array.isArray(tools)) this.searched(args.query, tools as { name: string }[]);
    return result;
  }

  /** A SEP-1821 `tools/list` with a query, passed through. */
  listed<T extends { tools: readonly { name: string }[] }>(query: unknown, result: T): T {
    if (typeof query === 'string' && query.trim() !== '') this.searched(query.trim(), result.tools);
    return result;
  }

  /** The most recent search that returned the tool gets the credit. Anything but a name (bad arguments) is ignored. */
  called(tool: unknown): void {
    if (!this.recorder || typeof tool !== 'string') return;
    for (let i = this.searches.length - 1; i >= 0; i--) {
      const search = this.searches[i]!;
      if (!search.tools.has(tool)) continue;
      if (search.recorded.has(tool)) return;
      search.recorded.add(tool);
      recordQuietly(this.recorder, this.log, { query: search.query, tool, scope: this.scope(), surface: 'mcp' });
      return;
    }
  }
}

/** Conversation turns whose kept tools are remembered (least recently seen first out). */
export const CHAT_TURNS = 10_000;

/** A conversation as the chat capture reads it: one step per message (chat) or input item (Responses API). */
export interface ConversationStep {
  role: string;
  text: string;
  /** Tools this step calls, with their call ids. */
  calls: { id: string; name: string }[];
  /** The call id a tool result answers (or a legacy function result's name). */
  ref: string;
}

/** Steps the model produced in one response: a tool call can follow its reasoning or text within the same answer. */
const MODEL_OUTPUT = new Set(['assistant', 'call', 'reasoning']);

const CALL_ITEMS = new Set(['function_call', 'custom_tool_call']);
const OUTPUT_ITEMS = new Set(['function_call_output', 'custom_tool_call_output']);

/** The conversation of a chat-completions or Responses API request, in order. */
export function conversationSteps(request: ToolRequest): ConversationStep[] {
  if (request.api === 'chat') {
    return (request as ChatRequest).messages.map((message) => ({
      role: message.role,
      text: contentText(message.content),
      calls: [
        ...(message.tool_calls ?? []).map((call) => ({ id: call.id ?? '', name: call.function?.name ?? call.custom?.name ?? '' })),
        ...(message.function_call ? [{ id: '', name: message.function_call.name }] : []),
      ].filter((call) => call.name !== ''),
      ref: message.tool_call_id ?? message.name ?? '',
    }));
  }
  const body = request.body as { input?: unknown; instructions?: unknown };
  const steps: ConversationStep[] = [];
  const step = (role: string, text = '', calls: ConversationStep['calls'] = [], ref = '') => steps.push({ role, text, calls, ref });
  if (typeof body.instructions === 'string') step('system', contentText(body.instructions));
  if (typeof body.input === 'string') step('user', contentText(body.input));
  for (const raw of Array.isArray(body.input) ? body.input : []) {
    const item = (raw ?? {}) as { type?: string; role?: string; content?: unknown; name?: string; call_id?: string };
    if (item.type !== undefined && CALL_ITEMS.has(item.type)) step('call', '', item.name ? [{ id: item.call_id ?? '', name: item.name }] : []);
    else if (item.type !== undefined && OUTPUT_ITEMS.has(item.type)) step('output', '', [], item.call_id ?? '');
    else step(item.role ?? item.type ?? '', contentText(item.content));
  }
  return steps;
}

interface Turn {
  query: string;
  /** Ranked tools the router kept for this turn that the model has not been seen calling yet. */
  kept: Set<string>;
  scope: string;
}

/**
 * The chat proxy's evidence. Each request carries the conversation so far, so when the model called a tool, the next
 * request shows it: a tool call after the messages the router ranked tools for. A turn is remembered by a hash of its
 * steps (role, text, tool calls) with the query it ranked with and the tools its ranking kept; a later request whose
 * history continues that exact prefix with a call to one of them records the event.
 */
export class ChatFeedback {
  private readonly turns = new Map<string, Turn>();

  constructor(
    private readonly recorder: FeedbackRecorder | undefined,
    private readonly log?: Logger,
    private readonly size = CHAT_TURNS,
  ) {}

  /**
   * Called for each forwarded request with the rewrite's decision: first credits earlier turns with the calls this
   * history shows, then remembers this turn's ranked tools.
   */
  observe(steps: readonly ConversationStep[], decision: { query: string; kept: readonly { name: string; reason: string }[] }, scope?: string): void {
    if (!this.recorder) return;
    const prefixes = prefixKeys(steps);
    let outputStart = 0;
    steps.forEach((step, position) => {
      if (!MODEL_OUTPUT.has(step.role)) {
        outputStart = position + 1;
        return;
      }
      if (step.calls.length === 0) return;
      // The turn the model answered ends where its answer (reasoning, text, calls) began.
      const turn = this.turns.get(prefixes[outputStart]!);
      if (!turn || turn.scope !== (scope ?? '')) return;
      for (const { name } of step.calls) {
        if (!turn.kept.delete(name)) continue;
        recordQuietly(this.recorder!, this.log, { query: turn.query, tool: name, scope, surface: 'chat' });
      }
    });
    const ranked = decision.kept.filter((tool) => tool.reason === 'ranked').map((tool) => tool.name);
    if (decision.query === '' || ranked.length === 0) return;
    const key = prefixes[steps.length]!;
    this.turns.delete(key);
    this.turns.set(key, { query: decision.query, kept: new Set(ranked), scope: scope ?? '' });
    if (this.turns.size > this.size) this.turns.delete(this.turns.keys().next().value!);
  }
}

/**
 * keys[i] identifies the conversation's first i steps, chained so all prefixes cost one pass. Only what a client
 * resends faithfully goes in (role, text, tool call names and ids), not the exact JSON, which clients reformat.
 */
function prefixKeys(steps: readonly ConversationStep[]): string[] {
  const keys = [''];
  let previous = '';
  for (const step of steps) {
    const part = JSON.stringify([step.role, step.text, step.calls.map((call) => [call.id, call.name]), step.ref]);
    previous = createHash('sha256').update(previous).update(part).digest('base64url');
    keys.push(previous);
  }
  return keys;
}
