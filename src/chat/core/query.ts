import { SELECT_PREFIX } from '../../search/search.js';
import type { Turn } from './tool-request.js';

/** How many recent user turns make the query: the last one says what is wanted now, the two before give context. */
export const QUERY_TURNS = 3;
/**
 * The last user turn appears this many times. Repetition is how both signals weigh words: BM25 adds a query term's
 * score once per occurrence, and mean-pooled embeddings average over all words, so a repeated turn pulls twice.
 */
export const LAST_TURN_WEIGHT = 2;

/**
 * The search query for a conversation: its recent user turns, the last one weighted, within `maxLength` characters.
 * Conversations without user text (a system prompt and tool results only) fall back to the system and developer
 * messages (and the Responses API's `instructions`, read as a system message), which describe the task. Returns ''
 * when there is nothing to search with.
 */
export function conversationQuery(messages: readonly Turn[], maxLength: number): string {
  let turns = textsOf(messages, (role) => role === 'user');
  if (turns.length === 0) turns = textsOf(messages, (role) => role === 'system' || role === 'developer');
  turns = turns.slice(-QUERY_TURNS);
  const last = turns.at(-1);
  if (last === undefined) return '';
  // The last turn first, so that the words that matter most lead the query and older turns are what a budget cuts.
  const parts = [...Array<string>(LAST_TURN_WEIGHT).fill(last), ...turns.slice(0, -1).reverse()];
  const budget = Math.max(1, Math.floor(maxLength / (LAST_TURN_WEIGHT + QUERY_TURNS - 1)) - 1);
  const query = parts.map((part) => clip(part, budget)).join('\n').slice(0, maxLength);
  // A user who writes "select: ..." is talking, not asking the search service to pick tools by name.
  return query.toLowerCase().startsWith(SELECT_PREFIX) ? query.slice(SELECT_PREFIX.length) : query;
}

function textsOf(messages: readonly Turn[], wanted: (role: string) => boolean): string[] {
  return messages
    .filter((message) => wanted(message.role))
    .map((message) => contentText(message.content))
    .filter((text) => text.length > 0);
}

/**
 * Message content is a string or a list of parts; only text parts say anything searchable (`text` in chat
 * completions, `input_text` / `output_text` in the Responses API).
 */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content.replace(/\s+/g, ' ').trim();
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => {
      const typed = part as { type?: unknown; text?: unknown } | null;
      return TEXT_PARTS.has(typed?.type) && typeof typed?.text === 'string' ? typed.text : '';
    })
    .join(' ')
    .replace(/\s+/g, ' ')
    .trim();
}

const TEXT_PARTS = new Set<unknown>(['text', 'input_text', 'output_text']);

/**
 * Keeps the beginning and the end of a long text: a pasted document often comes with the actual request before or
 * after it, and the middle is the least likely place for it.
 */
function clip(text: string, length: number): string {
  if (text.length <= length) return text;
  const half = Math.floor((length - 1) / 2);
  return `${text.slice(0, half)} ${text.slice(text.length - half)}`;
}
