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
 * The only stand-in the chat-proxy tests use: a small OpenAI-compatible HTTP server in place of the external LLM. It
 * records what it receives and answers however the test says (JSON, SSE, errors, silence).
 */
export interface StandInLlm {
  /** Base URL to configure as UPSTREAM_LLM_URL (`http://127.0.0.1:<port>/v1`). */
  url: string;
  received: ReceivedRequest[];
  /** The next requests are answered by this responder (until changed). */
  respond(responder: Responder): void;
  /** Resets received requests and the responder to the default JSON completion. */
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

export const jsonCompletion: Responder = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req-standin' });
  res.end(JSON.stringify(completion()));
};

export async function startStandInLlm(): Promise<StandInLlm> {
  let responder: Responder = jsonCompletion;
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
      responder = jsonCompletion;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
