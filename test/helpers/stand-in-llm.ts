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

/** Answers by path: a chat completion, or a response object for `/responses`. */
export const byPath: Responder = (req, res) => (req.url.split('?')[0]!.endsWith('/responses') ? jsonResponse(req, res) : jsonCompletion(req, res));

export async function startStandInLlm(): Promise<StandInLlm> {
  let responder: Responder = byPath;
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
      responder = byPath;
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
