import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { recordUse } from '../../feedback/capture.js';
import type { FeedbackRecorder } from '../../feedback/service.js';

/** Conversation turns whose kept tools are remembered (least recently seen first out). */
export const CHAT_TURNS = 10_000;

/**
 * A conversation as the chat capture reads it: one step per message (chat, Anthropic) or input item (Responses API),
 * each dialect's `conversationSteps` reads them.
 */
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
