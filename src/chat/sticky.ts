import { createHash } from 'node:crypto';
import type { ToolRequest } from './tool-request.js';

/**
 * Sticky selection: which tools each conversation was last forwarded, so its next turn forwards them again, first and
 * in the same order, and appends what is new. The tools block then only grows at its end, which keeps providers'
 * prompt caches warm and never takes a tool away from a model that has seen it.
 *
 * A conversation is recognised without any id from the caller: every turn resends the earlier ones, so turn N+1's
 * history starts with turn N's. Each turn is filed under the hash of its whole history; a request looks up the hashes of
 * its prefixes, longest first. A Responses request that continues a stored response (`previous_response_id`) is looked
 * up by that response's id instead. Kept in this process's memory, least recently used first out.
 */
export class StickySelections {
  private readonly entries = new Map<string, readonly string[]>();

  constructor(private readonly size: number) {}

  /** Keys of this request's conversation: its own (to file this turn under) and its prefixes' (to look up). */
  keys(request: ToolRequest, scope: string | undefined): ConversationKeys {
    // Who asks and through which API are part of the identity: two keys never share a selection.
    let hash = sha256(`${request.api}\u0000${scope ?? ''}`);
    const prefixes: string[] = [];
    for (const item of request.history) {
      hash = sha256(`${hash}\u0000${JSON.stringify(item)}`);
      prefixes.push(hash);
    }
    const lookups = prefixes.reverse();
    const root = sha256(`${request.api}\u0000${scope ?? ''}`);
    if (request.previousResponseId !== undefined) lookups.unshift(responseKey(root, request.previousResponseId));
    return { own: lookups.find((key) => !key.startsWith('response:')) ?? root, lookups, root };
  }

  /** The tools forwarded in this conversation's latest earlier turn, in their order; [] for a new conversation. */
  get(keys: ConversationKeys): readonly string[] {
    for (const key of keys.lookups) {
      const names = this.entries.get(key);
      if (names) {
        this.touch(key, names);
        return names;
      }
    }
    return [];
  }

  /** Files a turn's forwarded tools under its history, and under the upstream's response id when there is one. */
  set(keys: ConversationKeys, names: readonly string[], responseId?: string): void {
    if (this.size === 0) return;
    this.touch(keys.own, names);
    if (responseId !== undefined) this.touch(responseKey(keys.root, responseId), names);
    while (this.entries.size > this.size) this.entries.delete(this.entries.keys().next().value!);
  }

  get count(): number {
    return this.entries.size;
  }

  private touch(key: string, names: readonly string[]): void {
    // Re-inserting marks it most recently used.
    this.entries.delete(key);
    this.entries.set(key, names);
  }
}

export interface ConversationKeys {
  own: string;
  /** Longest prefix first (a `previous_response_id` before all). */
  lookups: string[];
  root: string;
}

const responseKey = (root: string, id: string) => `response:${sha256(`${root}\u0000${id}`)}`;

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
