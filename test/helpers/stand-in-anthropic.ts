import { startStandInLlm, type Responder, type StandInLlm } from './stand-in-llm.js';

/**
 * A local Anthropic-compatible server in place of the Messages API, for the Anthropic face's tests: the stand-in LLM
 * server (it records every request) answering in Anthropic's shapes — messages, their SSE events, count_tokens, the
 * model list, errors. `url` is its base URL as ANTHROPIC_BASE_URL is written (no /v1).
 */
export async function startStandInAnthropic(): Promise<StandInLlm> {
  const server = await startStandInLlm(anthropicByPath);
  return { ...server, url: server.url.replace(/\/v1$/, '') };
}

type Block = Record<string, unknown>;

export function message(content: Block[] | string = 'ok', id = 'msg_standin'): Record<string, unknown> {
  const blocks = typeof content === 'string' ? [{ type: 'text', text: content }] : content;
  return {
    id,
    type: 'message',
    role: 'assistant',
    model: 'claude-standin',
    content: blocks,
    stop_reason: blocks.some((block) => block.type === 'tool_use') ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5 },
  };
}

export const toolUse = (id: string, name: string, input: unknown): Block => ({ type: 'tool_use', id, name, input });

const json =
  (status: number, body: () => unknown): Responder =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': 'req_standin' });
    res.end(JSON.stringify(body()));
  };

export const jsonMessage = (body: () => unknown): Responder => json(200, body);

/** An error as Anthropic answers one. */
export const anthropicError = (status: number, type: string, text: string): Responder => json(status, () => ({ type: 'error', error: { type, message: text } }));

/**
 * The SSE events Anthropic streams for `message`: message_start, each block's start / deltas / stop (text in words,
 * tool input JSON in two halves), message_delta with the stop reason, message_stop; one event per chunk.
 */
export function messageEvents(full: Record<string, unknown>): string[] {
  const events: Record<string, unknown>[] = [{ type: 'message_start', message: { ...full, content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } } }];
  (full.content as Block[]).forEach((block, index) => {
    if (block.type === 'text') {
      events.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      for (const [i, word] of String(block.text).split(' ').entries()) events.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: i === 0 ? word : ` ${word}` } });
    } else if (block.type === 'tool_use') {
      events.push({ type: 'content_block_start', index, content_block: { ...block, input: {} } });
      const input = JSON.stringify(block.input);
      const half = Math.floor(input.length / 2);
      events.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: input.slice(0, half) } });
      events.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: input.slice(half) } });
    }
    events.push({ type: 'content_block_stop', index });
  });
  events.push({ type: 'message_delta', delta: { stop_reason: full.stop_reason, stop_sequence: null }, usage: { output_tokens: 5 } });
  events.push({ type: 'message_stop' });
  return events.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`);
}

export const streamedMessage =
  (full: () => Record<string, unknown>): Responder =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'request-id': 'req_standin' });
    for (const event of messageEvents(full())) res.write(event);
    res.end();
  };

export const ANTHROPIC_MODELS = { data: [{ type: 'model', id: 'claude-standin', display_name: 'Stand-in', created_at: '2025-01-01T00:00:00Z' }], has_more: false, first_id: 'claude-standin', last_id: 'claude-standin' };

/** Answers by path: a message (streamed when asked), count_tokens by the body's size, the model list. */
export const anthropicByPath: Responder = (req, res) => {
  const path = req.url.split('?')[0]!;
  if (path.endsWith('/count_tokens')) return json(200, () => ({ input_tokens: Math.ceil(req.raw.length / 4) }))(req, res);
  if (path.endsWith('/models')) return json(200, () => ANTHROPIC_MODELS)(req, res);
  return req.json?.stream === true ? streamedMessage(() => message())(req, res) : jsonMessage(() => message())(req, res);
};
