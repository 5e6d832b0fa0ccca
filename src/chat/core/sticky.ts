import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { ConversationStore, SelectionKey } from '../../state/conversations.js';
import type { ConversationShape } from './answers.js';

/**
 * Sticky selection: which tools each conversation was last forwarded, so its next turn forwards them again, first and
 * in the same order, and appends what is new. The tools block then only grows at its end, which keeps providers'
 * prompt caches warm and never takes a tool away from a model that has seen it.
 *
 * A conversation is recognised by its own history, without any id from the caller: a request continues an earlier one
 * only when its history begins with that earlier request's whole history *followed by the answer the upstream gave
 * it* (each dialect's answers.ts reads that answer from the reply as it is passed on, and from the assistant turn a later
 * history carries). A request whose history merely begins with the same words — every conversation that opens with
 * "hi" — has no such answer after them and starts clean. A Responses request that continues a stored response
 * (`previous_response_id`) is recognised by that response's id. Everything is within one caller scope (key) and API.
 * The selections live in a ConversationStore (src/state/conversations.ts): this process's memory, or Redis, where any
 * API instance continues any conversation. A store that fails (Redis away) costs stickiness for that turn, never the
 * request: the turn is ranked as a new conversation's and the failure logged.
 */
export class StickySelections {
  constructor(
    private readonly store: ConversationStore,
    private readonly log?: Logger,
  ) {}

  /**
   * This request's place in the conversation store: the key to file its turn under, and the earlier turns it may
   * continue (every prefix of its history that is followed by an assistant turn, longest first, with that turn's
   * fingerprint).
   */
  keys(request: ConversationRequest, shape: ConversationShape, scope: string | undefined): ConversationKeys {
    // Who asks and through which API are part of the identity: two keys never share a selection.
    const root = sha256(`${request.api}\u0000${scope ?? ''}`);
    const earlier: ConversationKeys['earlier'] = [];
    let hash = root;
    request.history.forEach((item, index) => {
      const answer = index > 0 ? shape.answerAt(request.history, index) : undefined;
      if (answer !== undefined) earlier.push({ key: hash, answer });
      hash = sha256(`${hash}\u0000${JSON.stringify(item, withoutCacheMarks)}`);
    });
    return {
      own: hash,
      earlier: earlier.reverse(),
      root,
      ...(request.previousResponseId === undefined ? {} : { previous: responseKey(root, request.previousResponseId) }),
    };
  }

  /** The tools forwarded in this conversation's latest earlier turn, in their order; [] for a new conversation. */
  async get(keys: ConversationKeys): Promise<readonly string[]> {
    const candidates: SelectionKey[] = [...(keys.previous === undefined ? [] : [{ key: keys.previous, answer: ANY }]), ...keys.earlier];
    try {
      return await this.store.selection(candidates);
    } catch (error) {
      this.log?.warn({ err: error }, 'conversation state unavailable; this turn is ranked as a new conversation\'s');
      return [];
    }
  }

  /**
   * Files a turn's forwarded tools under its history and the fingerprint of the answer its caller got, and under the
   * upstream's response id when there is one. A turn whose answer could not be read (an error, a cut stream) is not
   * filed: nothing can continue it.
   */
  async set(keys: ConversationKeys, names: readonly string[], answer: string | undefined, responseId?: string): Promise<void> {
    const filed: SelectionKey[] = [
      ...(answer === undefined ? [] : [{ key: keys.own, answer }]),
      ...(responseId === undefined ? [] : [{ key: responseKey(keys.root, responseId), answer: ANY }]),
    ];
    if (filed.length === 0) return;
    try {
      await this.store.remember(filed, names);
    } catch (error) {
      this.log?.warn({ err: error }, 'conversation state unavailable; this turn\'s tools were not stored');
    }
  }
}

/** What sticky selection reads of a request, whatever its API. */
export interface ConversationRequest {
  api: string;
  /** The conversation as sent, oldest first. */
  history: readonly unknown[];
  /** Responses API: the stored response this request continues. */
  previousResponseId?: string;
}

export interface ConversationKeys {
  /** Where this request's turn is filed: the hash of its whole history. */
  own: string;
  /** Earlier turns this request may continue: the hash of a history prefix and the answer that must follow it. */
  earlier: { key: string; answer: string }[];
  /** The `previous_response_id` this request continues, as a store key. */
  previous?: string;
  root: string;
}

/** A stored response is continued by its id alone. */
const ANY = '';

/**
 * Cache breakpoints are not part of what was said: Claude Code moves `cache_control` to the newest message every turn,
 * so an earlier message comes back without the mark it had when it was last.
 */
const withoutCacheMarks = (key: string, value: unknown) => (key === 'cache_control' ? undefined : value);

const responseKey = (root: string, id: string) => `response:${sha256(`${root}\u0000${id}`)}`;

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
