import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { recordUse } from '../../feedback/capture.js';
import type { FeedbackRecorder } from '../../feedback/service.js';
import { contentText } from './query.js';
import type { ChatRequest } from '../openai-chat/request.js';
import type { ToolRequest } from './tool-request.js';

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
  if (request.api === 'anthropic') return anthropicSteps(request.body as { system?: unknown; messages?: unknown });
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

/** Anthropic messages: `tool_use` blocks are an assistant step's calls; a `tool_result` block refers to its call's id. */
function anthropicSteps(body: { system?: unknown; messages?: unknown }): ConversationStep[] {
  const steps: ConversationStep[] = [];
  if (body.system !== undefined) steps.push({ role: 'system', text: contentText(body.system), calls: [], ref: '' });
  for (const raw of Array.isArray(body.messages) ? body.messages : []) {
    const message = (raw ?? {}) as { role?: string; content?: unknown };
    const blocks = (Array.isArray(message.content) ? message.content : []) as { type?: string; id?: string; name?: string; tool_use_id?: string }[];
    steps.push({
      role: message.role ?? '',
      text: contentText(message.content),
      calls: blocks.filter((block) => block.type === 'tool_use' && typeof block.name === 'string').map((block) => ({ id: block.id ?? '', name: block.name! })),
      ref: blocks.find((block) => block.type === 'tool_result')?.tool_use_id ?? '',
    });
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
        recordUse(this.recorder!, this.log, { query: turn.query, tool: name, scope, surface: 'chat' });
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
