/**
 * What a proxied chat conversation leaves behind for its next turn, whichever API it came in (chat completions,
 * Responses, Anthropic Messages): the tools each turn was forwarded (sticky selection, src/chat/core/sticky.ts) and the
 * tools each turn's ranking kept, for crediting a later call of one of them (src/chat/core/feedback-capture.ts).
 *
 * The chat face computes every key itself (hashes of the conversation's own history, within one caller scope and API);
 * a store only files and finds values under them. Two implementations: this process's memory (no Redis: least recently
 * used first out, as the proxy always kept them) and Redis (src/state/redis/conversations.ts: every value expires, so
 * any API instance continues any conversation).
 */

/** Where one turn's forwarded tools are filed: a history's hash and the fingerprint of the answer that followed it. */
export interface SelectionKey {
  /** The hash of a history prefix (or of a stored response id, sticky.ts `responseKey`). */
  key: string;
  /** The answer's fingerprint (src/chat/core/answers.ts); `''` for a stored response, continued by its id alone. */
  answer: string;
}

/** A ranked turn to credit: the tools a later history shows the model calling right after that turn. */
export interface TurnCalls {
  /** The turn's key (a hash of the steps it was ranked for). */
  turn: string;
  /** Tool names called, in the order the history shows them. */
  tools: readonly string[];
}

/** What a turn's ranking kept, remembered so a later call of one of them is credited to its query. */
export interface RankedTurn {
  turn: string;
  query: string;
  /** Ranked tools kept (not rule-kept ones: calling those says nothing about the query). */
  kept: readonly string[];
}

/**
 * The conversation store. Its contract, which both implementations keep (test/unit/state/conversations.test.ts):
 * - `selection` answers the tools filed under the first candidate that has any, in the order they were filed; [] when
 *   none has. A candidate found counts as recently used (memory) or gets its expiry renewed (Redis).
 * - `remember` files the same tool list under each key; filing again under a key replaces what it held.
 * - `observe` credits each called tool at most once per turn and only within the turn's own scope, even when two
 *   instances see the same call at once; then (when `ranked` is given) remembers this turn's ranking for `scope`,
 *   replacing any earlier one under the same key.
 * - Values are bounded (callers pass at most chat.maxTools names) and, in Redis, expire `ttlMs` after their last use.
 */
export interface ConversationStore {
  /** The tools filed under the first of `candidates` that has any; []: a new conversation. */
  selection(candidates: readonly SelectionKey[]): Promise<readonly string[]>;
  /** Files one turn's forwarded tools under each of `keys`. */
  remember(keys: readonly SelectionKey[], names: readonly string[]): Promise<void>;
  /**
   * Credits earlier ranked turns with the calls a history shows (each tool once per turn, and only when the turn was
   * ranked for `scope`), then remembers `ranked`. Returns the credits to record: the turn's query and the tool.
   */
  observe(calls: readonly TurnCalls[], scope: string, ranked?: RankedTurn): Promise<{ query: string; tool: string }[]>;
}

/** How many conversations each kind of memory holds. */
export interface MemoryConversationStoreOptions {
  /**
   * Histories whose forwarded tools are remembered (chat.stickyConversations); 0 remembers none.
   * @defaultValue 10000
   */
  selections?: number;
  /**
   * Ranked turns remembered for crediting calls.
   * @defaultValue 10000
   */
  turns?: number;
}

/** Answers remembered for one history (retries, regenerated answers), oldest first out. */
export const ANSWERS_PER_TURN = 4;

/**
 * This process's memory: least recently used first out, within the counts given. What the chat proxy always kept, so a
 * router without Redis behaves as before; a second instance sees none of it.
 */
export class MemoryConversationStore implements ConversationStore {
  /** By history hash: the tools forwarded, by the fingerprint of the answer the caller got. */
  private readonly selections = new Map<string, Map<string, readonly string[]>>();
  private readonly turns = new Map<string, { query: string; kept: Set<string>; scope: string }>();
  private readonly maxSelections: number;
  private readonly maxTurns: number;

  constructor(options: MemoryConversationStoreOptions = {}) {
    this.maxSelections = options.selections ?? 10_000;
    this.maxTurns = options.turns ?? 10_000;
  }

  async selection(candidates: readonly SelectionKey[]): Promise<readonly string[]> {
    for (const { key, answer } of candidates) {
      const answers = this.selections.get(key);
      const names = answers?.get(answer);
      if (answers && names) {
        touch(this.selections, key, answers);
        return names;
      }
    }
    return [];
  }

  async remember(keys: readonly SelectionKey[], names: readonly string[]): Promise<void> {
    if (this.maxSelections === 0) return;
    for (const { key, answer } of keys) {
      const answers = this.selections.get(key) ?? new Map<string, readonly string[]>();
      // The same history answered again (a retry, a regenerated answer): each answer is its own continuation.
      answers.delete(answer);
      answers.set(answer, names);
      while (answers.size > ANSWERS_PER_TURN) answers.delete(answers.keys().next().value!);
      touch(this.selections, key, answers);
    }
    while (this.selections.size > this.maxSelections) this.selections.delete(this.selections.keys().next().value!);
  }

  async observe(calls: readonly TurnCalls[], scope: string, ranked?: RankedTurn): Promise<{ query: string; tool: string }[]> {
    const credits: { query: string; tool: string }[] = [];
    for (const { turn: key, tools } of calls) {
      const turn = this.turns.get(key);
      if (!turn || turn.scope !== scope) continue;
      for (const tool of tools) if (turn.kept.delete(tool)) credits.push({ query: turn.query, tool });
    }
    if (ranked) {
      this.turns.delete(ranked.turn);
      this.turns.set(ranked.turn, { query: ranked.query, kept: new Set(ranked.kept), scope });
      if (this.turns.size > this.maxTurns) this.turns.delete(this.turns.keys().next().value!);
    }
    return credits;
  }
}

/** Re-inserting marks an entry most recently used. */
function touch<K, V>(map: Map<K, V>, key: K, value: V): void {
  map.delete(key);
  map.set(key, value);
}
