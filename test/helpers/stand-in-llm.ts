import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** One request as the stand-in LLM received it: the exact bytes, and the headers. */
export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  /** The body parsed as JSON (undefined when it is not JSON). */
  json: any;
}

export type Responder = (req: ReceivedRequest, res: ServerResponse) => void | Promise<void>;

/**
 * The only stand-in the chat-proxy and responses tests use: a small OpenAI-compatible HTTP server in place of the
 * external LLM, serving `/v1/chat/completions` and `/v1/responses`. It records what it receives and answers however
 * the test says (JSON, SSE, errors, silence); by default with a completion or a response object, by path.
 */
export interface StandInLlm {
  /** Base URL to configure as UPSTREAM_LLM_URL (`http://127.0.0.1:<port>/v1`). */
  url: string;
  received: ReceivedRequest[];
  /** The next requests are answered by this responder (until changed). */
  respond(responder: Responder): void;
  /** Resets received requests and the responder to the default (a JSON completion or response, by path). */
  reset(): void;
  close(): Promise<void>;
}

export function completion(content = 'ok'): Record<string, unknown> {
  return {
    id: 'chatcmpl-standin',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'stand-in',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

/** Answers 200 with `body` as JSON (and an `x-request-id`, to check upstream headers reach the caller). */
export const jsonBody =
  (body: () => unknown): Responder =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req-standin' });
    res.end(JSON.stringify(body()));
  };

export const jsonCompletion: Responder = jsonBody(() => completion());

/** A Responses API response object with one output message. */
export function responseObject(text = 'ok'): Record<string, unknown> {
  return {
    id: 'resp_standin',
    object: 'response',
    created_at: 1_700_000_000,
    status: 'completed',
    model: 'stand-in',
    output: [
      { type: 'message', id: 'msg_standin', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] },
    ],
    usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
  };
}

export const jsonResponse: Responder = jsonBody(() => responseObject());

/**
 * The Responses API's streaming events for one short answer, as the SSE text OpenAI sends: each event has an
 * `event:` line naming its type and a `data:` line with the JSON, and the stream ends without a [DONE] line.
 */
export function responsesEventStream(text = 'Hello there'): string {
  const final = responseObject(text);
  const events: Record<string, unknown>[] = [
    { type: 'response.created', sequence_number: 0, response: { ...final, status: 'in_progress', output: [] } },
    { type: 'response.output_item.added', sequence_number: 1, output_index: 0, item: { type: 'message', id: 'msg_standin', role: 'assistant', content: [] } },
    ...text.split(' ').map((word, i) => ({
      type: 'response.output_text.delta',
      sequence_number: 2 + i,
      item_id: 'msg_standin',
      output_index: 0,
      content_index: 0,
      delta: i === 0 ? word : ` ${word}`,
    })),
    { type: 'response.completed', sequence_number: 99, response: final },
  ];
  return events.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`).join('');
}

/** The model list an OpenAI-compatible server answers `GET /v1/models` with. */
export const MODEL_LIST = { object: 'list', data: [{ id: 'stand-in', object: 'model', created: 1_700_000_000, owned_by: 'toolrouter-tests' }] };

/** Answers by path: a chat completion, a response object for `/responses`, the model list for `/models`. */
export const byPath: Responder = (req, res) => {
  const path = req.url.split('?')[0]!;
  if (path.endsWith('/models')) return jsonBody(() => MODEL_LIST)(req, res);
  return path.endsWith('/responses') ? jsonResponse(req, res) : jsonCompletion(req, res);
};

/** The n-th request gets the n-th responder (counted from the last reset); the last one answers every later request. */
export function scripted(...responders: Responder[]): Responder {
  let next = 0;
  return (req, res) => responders[Math.min(next++, responders.length - 1)]!(req, res);
}

/** Answers 200 with a `text/event-stream` body, one chunk per event. */
export const sse =
  (events: () => string[]): Responder =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'req-standin' });
    for (const event of events()) res.write(event);
    res.end();
  };

/** A chat completion whose assistant message calls one function. */
export function toolCallCompletion(id: string, name: string, args: unknown): Record<string, unknown> {
  return {
    ...completion(),
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }] },
        finish_reason: 'tool_calls',
      },
    ],
  };
}

/** The chat-completion chunks of a streamed function call, arguments split in two, as `data:` events. */
export function toolCallChunks(id: string, name: string, args: unknown): string[] {
  const json = JSON.stringify(args);
  const chunk = (delta: unknown, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-standin', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'stand-in', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const half = Math.floor(json.length / 2);
  return [
    chunk({ role: 'assistant', content: null }),
    chunk({ tool_calls: [{ index: 0, id, type: 'function', function: { name, arguments: '' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: json.slice(0, half) } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: json.slice(half) } }] }),
    chunk({}, 'tool_calls'),
    'data: [DONE]\n\n',
  ];
}

/** The chunks of a streamed text answer. */
export function textChunks(text: string): string[] {
  const chunk = (delta: unknown, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-standin', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'stand-in', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  return [chunk({ role: 'assistant', content: '' }), ...text.split(' ').map((word, i) => chunk({ content: i === 0 ? word : ` ${word}` })), chunk({}, 'stop'), 'data: [DONE]\n\n'];
}

/** A Responses API response whose output is one function call. */
export function functionCallResponse(callId: string, name: string, args: unknown, id = 'resp_call'): Record<string, unknown> {
  return {
    ...responseObject(),
    id,
    output: [{ type: 'function_call', id: `fc_${callId}`, call_id: callId, name, arguments: JSON.stringify(args), status: 'completed' }],
  };
}

/** The Responses API events of a streamed function call. */
export function functionCallEvents(callId: string, name: string, args: unknown, id = 'resp_call'): string[] {
  const final = functionCallResponse(callId, name, args, id);
  const item = (final.output as Record<string, unknown>[])[0]!;
  const events: Record<string, unknown>[] = [
    { type: 'response.created', sequence_number: 0, response: { ...final, status: 'in_progress', output: [] } },
    { type: 'response.output_item.added', sequence_number: 1, output_index: 0, item: { ...item, arguments: '', status: 'in_progress' } },
    { type: 'response.function_call_arguments.delta', sequence_number: 2, item_id: item.id, output_index: 0, delta: item.arguments },
    { type: 'response.output_item.done', sequence_number: 3, output_index: 0, item },
    { type: 'response.completed', sequence_number: 4, response: final },
  ];
  return events.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`);
}

/** `fallback` answers until a test says otherwise (the Anthropic stand-in passes its own: test/helpers/stand-in-anthropic.ts). */
export async function startStandInLlm(fallback: Responder = byPath): Promise<StandInLlm> {
  let responder: Responder = fallback;
  const received: ReceivedRequest[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        json = undefined;
      }
      const record: ReceivedRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, raw, json };
      received.push(record);
      void Promise.resolve(responder(record, res)).catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    received,
    respond: (next) => {
      responder = next;
    },
    reset: () => {
      received.length = 0;
      responder = fallback;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What the proxy answered a test: status, headers, the exact bytes, and the body parsed when it is JSON. */
export interface ProxyAnswer {
  status: number;
  headers: Headers;
  raw: Buffer;
  json: any;
}

/** POSTs a body (a string is sent as is, anything else as JSON) and reads the whole answer. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<ProxyAnswer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const raw = Buffer.from(await response.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, raw, json };
}
