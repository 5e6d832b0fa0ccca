import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { recordUse } from '../../feedback/capture.js';
import type { FeedbackRecorder } from '../../feedback/service.js';
import type { ConversationStore, TurnCalls } from '../../state/conversations.js';

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

/**
 * The chat proxy's evidence. Each request carries the conversation so far, so when the model called a tool, the next
 * request shows it: a tool call after the messages the router ranked tools for. A turn is remembered by a hash of its
 * steps (role, text, tool calls) with the query it ranked with and the tools its ranking kept; a later request whose
 * history continues that exact prefix with a call to one of them records the event. The turns live in a
 * ConversationStore (src/state/conversations.ts), so with Redis a call seen on any instance credits a turn ranked on
 * another, once.
 */
export class ChatFeedback {
  constructor(
    private readonly recorder: FeedbackRecorder | undefined,
    private readonly store: ConversationStore,
    private readonly log?: Logger,
  ) {}

  /**
   * Called for each forwarded request with the rewrite's decision: first credits earlier turns with the calls this
   * history shows, then remembers this turn's ranked tools. Never fails: the request goes on without its evidence.
   */
  async observe(steps: readonly ConversationStep[], decision: { query: string; kept: readonly { name: string; reason: string }[] }, scope?: string): Promise<void> {
    const recorder = this.recorder;
    if (!recorder) return;
    const prefixes = prefixKeys(steps);
    const calls: TurnCalls[] = [];
    let outputStart = 0;
    steps.forEach((step, position) => {
      if (!MODEL_OUTPUT.has(step.role)) {
        outputStart = position + 1;
        return;
      }
      // The turn the model answered ends where its answer (reasoning, text, calls) began.
      if (step.calls.length > 0) calls.push({ turn: prefixes[outputStart]!, tools: step.calls.map((call) => call.name) });
    });
    const ranked = decision.kept.filter((tool) => tool.reason === 'ranked').map((tool) => tool.name);
    const remember = decision.query !== '' && ranked.length > 0 ? { turn: prefixes[steps.length]!, query: recorder.storedQuery?.(decision.query) ?? decision.query, kept: ranked } : undefined;
    if (calls.length === 0 && !remember) return;
    try {
      const credits = await this.store.observe(calls, scope ?? '', remember);
      for (const { query, tool } of credits) recordUse(recorder, this.log, { query, tool, scope, surface: 'chat' });
    } catch (error) {
      this.log?.warn({ err: error }, 'conversation state unavailable; this turn\'s feedback was not captured');
    }
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
