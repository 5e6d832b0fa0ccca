import { createHash } from 'node:crypto';
import { isEventStream, SseJsonReader } from './sse.js';

/**
 * The model's answer to a turn, reduced to what identifies it: the ids of the tool calls it made (unique per call, and
 * resent by every client as they came), or, for a text answer, its text. Sticky selection uses it to tell a true
 * continuation (a history that carries the very answer the upstream gave) from another conversation that happens to
 * begin with the same words. It is read from two sides, in each API's message shape (each dialect's answers.ts): from the upstream's reply as the
 * proxy passes it on (JSON or SSE), and from the assistant turn a later request carries in its history.
 */
export interface ConversationShape {
  /** The fingerprint of the assistant turn that starts at `history[index]`; undefined when none starts there. */
  answerAt(history: readonly unknown[], index: number): string | undefined;
  /** Reads the upstream's reply as it streams to the caller; undefined for a reply it cannot read. */
  reader(answer: globalThis.Response): AnswerReader | undefined;
}

export interface AnswerReader {
  push(chunk: Uint8Array): void;
  /** The answer's fingerprint once the reply has all come; undefined when it held no answer (an error, a cut stream). */
  finish(): string | undefined;
  /** Responses API: the response's id, which a later request may continue by (`previous_response_id`). */
  readonly responseId?: string;
}

/** Longest streamed text read for a fingerprint; a longer answer is not remembered (its next turn starts clean). */
export const MAX_TEXT = 1_000_000;

/** Hashed, so the store holds a fixed size per turn whatever the model wrote. */
export function answerFingerprint(text: string, callIds: readonly string[]): string | undefined {
  if (callIds.length > 0) return `calls:${sha256(callIds.join('\u0000'))}`;
  const normalised = text.replace(/\s+/g, ' ').trim();
  return normalised === '' || normalised.length > MAX_TEXT ? undefined : `text:${sha256(normalised)}`;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

export type Json = Record<string, unknown>;
export const asObject = (value: unknown): Json | undefined => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined);
export const isString = (value: unknown): value is string => typeof value === 'string';

/**
 * Reads an upstream reply for its answer: a JSON one is held and read whole with `fromJson`, an SSE one event by event
 * with the state `sse` makes (each dialect's answers.ts gives both).
 */
export function replyReader(
  answer: globalThis.Response,
  fromJson: (json: Json) => string | undefined,
  sse: () => { event(data: Json): void; finish(): string | undefined; responseId?: string },
): AnswerReader | undefined {
  if (isEventStream(answer)) {
    const state = sse();
    const events = new SseJsonReader(({ data }) => state.event(data));
    return {
      push: (chunk) => events.push(chunk),
      finish: () => state.finish(),
      get responseId() {
        return state.responseId;
      },
    };
  }
  if (!(answer.headers.get('content-type') ?? '').includes('json')) return undefined;
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  let responseId: string | undefined;
  return {
    get responseId() {
      return responseId;
    },
    push: (chunk) => {
      // A reply too long to be worth remembering is not read at all (its turn is then not sticky).
      bytes += chunk.byteLength;
      if (bytes <= MAX_JSON_BYTES) chunks.push(chunk);
    },
    finish: () => {
      if (bytes > MAX_JSON_BYTES) return undefined;
      try {
        const json = asObject(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        if (json?.object === 'response' && isString(json.id)) responseId = json.id;
        return json ? fromJson(json) : undefined;
      } catch {
        return undefined;
      }
    },
  };
}

const MAX_JSON_BYTES = 8 * 1024 * 1024;
