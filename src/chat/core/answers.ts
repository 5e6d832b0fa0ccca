import { createHash } from 'node:crypto';
import { contentText } from './query.js';
import { isEventStream, SseJsonReader } from './sse.js';

/**
 * The model's answer to a turn, reduced to what identifies it: the ids of the tool calls it made (unique per call, and
 * resent by every client as they came), or, for a text answer, its text. Sticky selection uses it to tell a true
 * continuation (a history that carries the very answer the upstream gave) from another conversation that happens to
 * begin with the same words. It is read from two sides, for each API's message shape: from the upstream's reply as the
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
const MAX_TEXT = 1_000_000;

/** Hashed, so the store holds a fixed size per turn whatever the model wrote. */
export function answerFingerprint(text: string, callIds: readonly string[]): string | undefined {
  if (callIds.length > 0) return `calls:${sha256(callIds.join('\u0000'))}`;
  const normalised = text.replace(/\s+/g, ' ').trim();
  return normalised === '' || normalised.length > MAX_TEXT ? undefined : `text:${sha256(normalised)}`;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

type Json = Record<string, unknown>;
const asObject = (value: unknown): Json | undefined => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined);
const isString = (value: unknown): value is string => typeof value === 'string';

/** A JSON reply is held and read whole; an SSE one event by event. */
function replyReader(
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

/** Chat completions: the answer is one assistant message (text and `tool_calls`). */
export const chatShape: ConversationShape = {
  answerAt(history, index) {
    const message = asObject(history[index]);
    if (message?.role !== 'assistant') return undefined;
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    return answerFingerprint(contentText(message.content), calls.map((call) => asObject(call)?.id).filter(isString));
  },
  reader: (answer) =>
    replyReader(
      answer,
      (json) => {
        const message = asObject((json.choices as unknown[] | undefined)?.[0])?.message;
        return message === undefined ? undefined : chatShape.answerAt([message], 0);
      },
      () => {
        let text = '';
        const ids: string[] = [];
        return {
          event(data) {
            const delta = asObject(asObject((data.choices as unknown[] | undefined)?.[0])?.delta);
            if (!delta) return;
            if (isString(delta.content) && text.length <= MAX_TEXT) text += delta.content;
            for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
              const id = asObject(call)?.id;
              if (isString(id)) ids.push(id);
            }
          },
          finish: () => answerFingerprint(text, ids),
        };
      },
    ),
};

/** Items of a Responses API conversation the model produced (one answer may be several: reasoning, text, calls). */
const isOutputItem = (item: Json | undefined): boolean =>
  item !== undefined && (item.role === 'assistant' || ['function_call', 'custom_tool_call', 'reasoning'].includes(item.type as string));

function outputFingerprint(items: readonly unknown[]): string | undefined {
  let text = '';
  const ids: string[] = [];
  for (const raw of items) {
    const item = asObject(raw);
    if (item?.role === 'assistant') text += ` ${contentText(item.content)}`;
    else if (isString(item?.call_id)) ids.push(item.call_id);
  }
  return answerFingerprint(text, ids);
}

/** Responses API: the answer is the run of output items (assistant messages, function calls, reasoning) in the input. */
export const responsesShape: ConversationShape = {
  answerAt(history, index) {
    if (!isOutputItem(asObject(history[index])) || isOutputItem(asObject(history[index - 1]))) return undefined;
    let end = index;
    while (end < history.length && isOutputItem(asObject(history[end]))) end++;
    return outputFingerprint(history.slice(index, end));
  },
  reader: (answer) =>
    replyReader(
      answer,
      (json) => (Array.isArray(json.output) ? outputFingerprint(json.output) : undefined),
      () => {
        let fingerprint: string | undefined;
        const state = {
          responseId: undefined as string | undefined,
          event(data: Json) {
            const response = asObject(data.response);
            if (data.type === 'response.created' && isString(response?.id)) state.responseId = response.id;
            if (data.type === 'response.completed' && Array.isArray(response?.output)) fingerprint = outputFingerprint(response.output);
          },
          finish: () => fingerprint,
        };
        return state;
      },
    ),
};

/** Content blocks that call a tool: `tool_use`, and server-side ones (`server_tool_use`, `mcp_tool_use`). */
const isToolUse = (block: Json | undefined): boolean => typeof block?.type === 'string' && block.type.endsWith('tool_use') && isString(block.id);

function blocksFingerprint(content: unknown): string | undefined {
  if (typeof content === 'string') return answerFingerprint(content, []);
  if (!Array.isArray(content)) return undefined;
  const blocks = content.map(asObject);
  return answerFingerprint(contentText(content), blocks.filter(isToolUse).map((block) => block!.id as string));
}

/** Anthropic Messages: the answer is one assistant message (text and `tool_use` blocks). */
export const anthropicShape: ConversationShape = {
  answerAt(history, index) {
    const message = asObject(history[index]);
    return message?.role === 'assistant' ? blocksFingerprint(message.content) : undefined;
  },
  reader: (answer) =>
    replyReader(
      answer,
      (json) => blocksFingerprint(json.content),
      () => {
        let text = '';
        const ids: string[] = [];
        return {
          event(data) {
            const block = asObject(data.content_block);
            const delta = asObject(data.delta);
            if (data.type === 'content_block_start' && isToolUse(block)) ids.push(block!.id as string);
            // Blocks are joined with a space, as contentText joins them when the history carries them back.
            else if (data.type === 'content_block_start' && block?.type === 'text') text += ` ${isString(block.text) ? block.text : ''}`;
            else if (data.type === 'content_block_delta' && delta?.type === 'text_delta' && isString(delta.text) && text.length <= MAX_TEXT) text += delta.text;
          },
          finish: () => answerFingerprint(text, ids),
        };
      },
    ),
};
