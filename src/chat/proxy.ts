import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { OpenAiError } from './errors.js';
import type { Api } from './tool-request.js';

/** The upstream endpoints the proxy forwards to, by API. */
export const UPSTREAM_ENDPOINTS = { chat: 'chat/completions', responses: 'responses' } as const satisfies Record<Api, string>;

export interface UpstreamSettings {
  /** OpenAI-compatible base URL (`https://api.openai.com/v1`), or the full chat-completions or responses URL. */
  url: string;
  /** Which endpoint under the base URL. */
  api: Api;
  /** Replaces the caller's Authorization when set. */
  key?: string;
  /** Longest wait for the upstream's response head, and then between two chunks of its body. */
  timeoutMs: number;
}

/** Connection-level headers (RFC 9110 §7.6.1) and those the proxy recomputes; never copied across. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'host',
  'expect',
]);

/**
 * `<base>/chat/completions` or `<base>/responses`. A base that already ends in either endpoint (UPSTREAM_LLM_URL set
 * to the full chat-completions URL, as Azure deployments are) has it replaced, so one setting serves both APIs. The
 * caller's query string (Azure's `api-version`) is kept.
 */
export function upstreamUrl(base: string, api: Api, incomingUrl: string): string {
  const url = new URL(base);
  const root = url.pathname.replace(/\/+$/, '').replace(/\/(chat\/completions|responses)$/, '');
  url.pathname = `${root}/${UPSTREAM_ENDPOINTS[api]}`;
  const search = new URL(incomingUrl, 'http://placeholder').search;
  if (search) url.search = search;
  return url.toString();
}

export function chatCompletionsUrl(base: string, incomingUrl: string): string {
  return upstreamUrl(base, 'chat', incomingUrl);
}

/**
 * Forwards a request (chat completion or response) and streams the upstream's answer back as it comes: status, headers and body
 * bytes unchanged, so SSE chunks, error bodies and anything else the upstream says reach the caller exactly. Nothing
 * is parsed on the way back. Errors before the upstream answers are OpenAI-style (502 unreachable, 504 timeout); once
 * the body is streaming, a failure can only cut the connection, which clients see as a truncated stream.
 */
export async function forwardRequest(
  req: Request,
  res: Response,
  body: Uint8Array | string,
  upstream: UpstreamSettings,
  log: Logger,
): Promise<void> {
  const controller = new AbortController();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`no answer from the upstream LLM within ${upstream.timeoutMs} ms`));
    }, upstream.timeoutMs);
  };
  // A caller that hangs up stops the upstream generation too, instead of leaving it to run (and bill) to the end.
  const onClose = () => {
    if (!res.writableFinished) controller.abort(new Error('client closed the connection'));
  };
  res.on('close', onClose);
  arm();
  try {
    let answer: globalThis.Response;
    try {
      answer = await fetch(upstreamUrl(upstream.url, upstream.api, req.originalUrl), {
        method: 'POST',
        headers: upstreamHeaders(req, upstream.key),
        body,
        signal: controller.signal,
      });
    } catch (error) {
      if (timedOut) {
        throw new OpenAiError(504, `The upstream LLM did not answer within ${upstream.timeoutMs} ms.`, 'api_error', null, 'upstream_timeout');
      }
      if (controller.signal.aborted) return;
      const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
      throw new OpenAiError(502, `The upstream LLM could not be reached: ${cause}`, 'api_error', null, 'upstream_unreachable');
    }
    res.status(answer.status);
    // fetch decodes compressed bodies; their length and encoding no longer describe the bytes passed on.
    const decoded = answer.headers.has('content-encoding');
    answer.headers.forEach((value, name) => {
      if (name === 'content-length' ? decoded : HOP_BY_HOP.has(name) || name === 'content-encoding' || name === 'set-cookie') return;
      res.setHeader(name, value);
    });
    if (!answer.body) {
      res.end();
      return;
    }
    res.flushHeaders();
    // Each chunk re-arms the timer: a long generation that keeps streaming is fine, a stalled one is cut.
    const watchdog = new Transform({
      transform(chunk, _encoding, done) {
        arm();
        done(null, chunk);
      },
    });
    try {
      await pipeline(Readable.fromWeb(answer.body as WebReadableStream<Uint8Array>), watchdog, res);
    } catch (error) {
      if (!controller.signal.aborted || timedOut) {
        log.warn({ err: error, timedOut }, 'upstream LLM stream broke off; connection to the caller closed');
      }
      res.destroy();
    }
  } finally {
    clearTimeout(timer);
    res.off('close', onClose);
  }
}

/** The caller's headers minus connection-level ones and toolrouter's own; the upstream key, when set, replaces theirs. */
function upstreamHeaders(req: Request, key: string | undefined): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith('x-toolrouter-') || name === 'accept-encoding') continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  headers.set('content-type', 'application/json');
  // Uncompressed, so the bytes passed back are the upstream's own and SSE is not held in a compressor's buffer.
  headers.set('accept-encoding', 'identity');
  if (key !== undefined) headers.set('authorization', `Bearer ${key}`);
  return headers;
}
