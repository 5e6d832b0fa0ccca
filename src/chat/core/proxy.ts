import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { ToolrouterError } from '../../errors.js';
import { isEventStream } from './sse.js';
/**
 * Where a request goes under the upstream's base URL:
 * - `{ endpoint }`: POSTed as JSON to `<base>/<endpoint>` (`chat/completions`, `responses`);
 * - `below-v1`: the caller's own method and path below /v1 (`GET /v1/models` is `<base>/models`), the body as it came;
 * - `whole-path`: the caller's own method and whole path (`/v1/messages`...) under a base written without /v1, as
 *   ANTHROPIC_BASE_URL is (one with /v1 is read as if it had none), the body as JSON.
 */
export type UpstreamRoute = { endpoint: string } | 'below-v1' | 'whole-path';

export interface UpstreamSettings {
  /**
   * The base URL: OpenAI-compatible (`https://api.openai.com/v1`, or the full chat-completions or responses URL), or
   * Anthropic's (`https://api.anthropic.com`).
   */
  url: string;
  route: UpstreamRoute;
  /** Replaces the caller's credentials when set: as `Authorization: Bearer <key>`, or in `x-api-key` (Anthropic's). */
  key?: string;
  keyHeader: 'authorization' | 'x-api-key';
  /** Longest wait for the upstream's response head, and then between two chunks of its body. */
  timeoutMs: number;
}

/**
 * Reads the start of an upstream answer to decide whether the caller gets it. `push` says `pass` as soon as the turn is
 * certainly the caller's (the proxy then streams what it held and the rest as it comes); a turn never passed is held
 * to its end, and `finish` either takes it (the proxy answers it itself) or lets it go to the caller after all.
 */
export interface TurnReader<T> {
  push(chunk: Uint8Array): 'hold' | 'pass';
  finish(): T | undefined;
}

export interface ForwardHooks<T> {
  reader?: (answer: globalThis.Response) => TurnReader<T> | undefined;
  observe?: (answer: globalThis.Response) => { push(chunk: Uint8Array): void } | undefined;
  /**
   * Files the turn (src/chat/core/sticky.ts) once the observer has seen the whole answer, before the caller has it:
   * a successful answer's last bytes (not streamed) or its terminal event (streamed) wait for it, at most
   * `settleTimeoutMs`; a slower store does not hold the reply (the filing goes on after it).
   */
  settle?: () => Promise<void>;
  settleTimeoutMs?: number;
}

/**
 * Where a streamed answer ends: the terminal event of each API (Chat Completions' `[DONE]`, Anthropic's `message_stop`,
 * Responses' `response.completed`), named by its `event:` line or, from upstreams that send none, its data's `type`. From
 * the chunk where one starts, the rest is held until the turn is filed; a stream without one is filed before it ends.
 */
const TERMINAL_EVENT = /(?:^|\n)(?:data: ?\[DONE\]|event: ?(?:message_stop|response\.completed)|data: ?\{"type": ?"(?:message_stop|response\.completed)")/;

/** Bytes of the previous chunk kept to find a terminal event split over two chunks. */
const TERMINAL_TAIL = 64;

/** Most bytes of one upstream turn held back while deciding; a longer turn goes to the caller as it is. */
const MAX_HELD_BYTES = 16 * 1024 * 1024;

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
 * `<base>/chat/completions` or `<base>/responses` (the route's endpoint). A base that already ends in either endpoint
 * (UPSTREAM_LLM_URL set to the full chat-completions URL, as Azure deployments are) has it replaced, so one setting
 * serves both OpenAI APIs. The caller's query string (Azure's `api-version`) is kept.
 */
export function upstreamUrl(base: string, route: UpstreamRoute, incomingUrl: string): string {
  const url = new URL(base);
  const root = url.pathname.replace(/\/+$/, '').replace(/\/(chat\/completions|responses)$/, '');
  const incoming = new URL(incomingUrl, 'http://placeholder');
  // Passed-through routes keep their path below /v1: `GET /v1/models` is `<base>/models`. Anthropic's base has no /v1
  // (one that does is read as if it had not).
  url.pathname =
    route === 'whole-path'
      ? `${url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '')}${incoming.pathname}`
      : route === 'below-v1'
        ? `${root}${incoming.pathname.replace(/^\/v1(?=\/)/, '')}`
        : `${root}/${route.endpoint}`;
  const { search } = incoming;
  if (search) url.search = search;
  return url.toString();
}

/**
 * Forwards a request (chat completion, response, or a passed-through route) and streams the upstream's answer back as
 * it comes: status, headers and body bytes unchanged, so SSE chunks, error bodies and anything else the upstream says
 * reach the caller exactly. Errors before the upstream answers are ToolrouterErrors each dialect answers in its shape (502 unreachable, 504 timeout); once
 * the body is streaming, a failure can only cut the connection, which clients see as a truncated stream.
 *
 * With a `reader`, a successful answer is first shown to it: a turn it takes is returned and nothing is sent to the
 * caller (the proxy answers that turn itself and asks the upstream again); any other is sent on unchanged. With an
 * `observe`r, a successful answer that goes to the caller is shown to it too, every byte as it is passed on.
 */
export async function forwardRequest<T>(
  req: Request,
  res: Response,
  body: Uint8Array | string | undefined,
  upstream: UpstreamSettings,
  log: Logger,
  { reader, observe, settle, settleTimeoutMs = 250 }: ForwardHooks<T> = {},
): Promise<T | undefined> {
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
  const timeout = () => new ToolrouterError('upstream_timeout', `The upstream LLM did not answer within ${upstream.timeoutMs} ms.`);
  // A caller that hangs up stops the upstream generation too, instead of leaving it to run (and bill) to the end.
  const onClose = () => {
    if (!res.writableFinished) controller.abort(new Error('client closed the connection'));
  };
  res.on('close', onClose);
  arm();
  try {
    let answer: globalThis.Response;
    try {
      const { route } = upstream;
      answer = await fetch(upstreamUrl(upstream.url, route, req.originalUrl), {
        method: typeof route === 'object' ? 'POST' : req.method,
        headers: upstreamHeaders(req, upstream.key, upstream.keyHeader, route !== 'below-v1' && body !== undefined),
        body,
        signal: controller.signal,
      });
    } catch (error) {
      if (timedOut) throw timeout();
      if (controller.signal.aborted) return undefined;
      const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
      throw new ToolrouterError('upstream_unreachable', `The upstream LLM could not be reached: ${cause}`, { status: 502 });
    }
    const chunks = answer.body?.getReader();
    const turn = answer.ok && chunks ? reader?.(answer) : undefined;
    const held: Uint8Array[] = [];
    let ended = false;
    if (turn && chunks) {
      let heldBytes = 0;
      try {
        for (;;) {
          const { done, value } = await chunks.read();
          arm();
          if (done) {
            ended = true;
            break;
          }
          held.push(value);
          heldBytes += value.byteLength;
          if (turn.push(value) === 'pass' || heldBytes > MAX_HELD_BYTES) break;
        }
      } catch (error) {
        if (timedOut) throw timeout();
        if (controller.signal.aborted) return undefined;
        throw new ToolrouterError('upstream_unreachable', `The upstream LLM broke off its answer: ${(error as Error).message}`, { status: 502 });
      }
      if (ended) {
        const taken = turn.finish();
        if (taken !== undefined) return taken;
      }
    }
    res.status(answer.status);
    // fetch decodes compressed bodies; their length and encoding no longer describe the bytes passed on.
    const decoded = answer.headers.has('content-encoding');
    answer.headers.forEach((value, name) => {
      if (name === 'content-length' ? decoded : HOP_BY_HOP.has(name) || name === 'content-encoding' || name === 'set-cookie') return;
      res.setHeader(name, value);
    });
    if (!chunks) {
      res.end();
      return undefined;
    }
    res.flushHeaders();
    const observer = answer.ok ? observe?.(answer) : undefined;
    const file = answer.ok && settle ? () => settleWithin(settle, settleTimeoutMs, log) : undefined;
    const streamed = isEventStream(answer);
    async function* upstreamChunks(): AsyncGenerator<Uint8Array> {
      yield* held;
      while (!ended) {
        const { done, value } = await chunks!.read();
        if (done) return;
        yield value;
      }
    }
    // With a turn to file, the end of the answer is held back until it is filed: streamed, from the chunk where the
    // terminal event starts; not streamed, the last chunk (the caller needs all of a JSON body, so holding one chunk
    // delays nothing it could use).
    async function* rest(): AsyncGenerator<Uint8Array> {
      const kept: Uint8Array[] = [];
      let terminal = false;
      let tail = '';
      for await (const chunk of upstreamChunks()) {
        observer?.push(chunk);
        if (!file) {
          yield chunk;
        } else if (streamed) {
          if (!terminal) {
            const text = tail + Buffer.from(chunk).toString('latin1');
            terminal = TERMINAL_EVENT.test(text);
            tail = text.slice(-TERMINAL_TAIL);
          }
          if (terminal) kept.push(chunk);
          else yield chunk;
        } else {
          const previous = kept.pop();
          if (previous) yield previous;
          kept.push(chunk);
        }
      }
      if (file) await file();
      yield* kept;
    }
    // Each chunk re-arms the timer: a long generation that keeps streaming is fine, a stalled one is cut.
    const watchdog = new Transform({
      transform(chunk, _encoding, done) {
        arm();
        done(null, chunk);
      },
    });
    try {
      await pipeline(Readable.from(rest()), watchdog, res);
    } catch (error) {
      if (!controller.signal.aborted || timedOut) {
        log.warn({ err: error, timedOut }, 'upstream LLM stream broke off; connection to the caller closed');
      }
      res.destroy();
    }
    return undefined;
  } finally {
    clearTimeout(timer);
    res.off('close', onClose);
  }
}

/** Runs `settle`, waiting for it at most `timeoutMs`; its failure is logged (a turn not filed costs stickiness only). */
async function settleWithin(settle: () => Promise<void>, timeoutMs: number, log: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const filed = settle().catch((error: unknown) => log.warn({ err: error }, 'proxied turn not filed'));
  await Promise.race([filed, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
}

/** The caller's headers minus connection-level ones and toolrouter's own; the upstream key, when set, replaces theirs. */
function upstreamHeaders(req: Request, key: string | undefined, keyHeader: UpstreamSettings['keyHeader'], json: boolean): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith('x-toolrouter-') || name === 'accept-encoding') continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  if (json) headers.set('content-type', 'application/json');
  // Uncompressed, so the bytes passed back are the upstream's own and SSE is not held in a compressor's buffer.
  headers.set('accept-encoding', 'identity');
  if (key !== undefined && keyHeader === 'x-api-key') {
    headers.delete('authorization');
    headers.set('x-api-key', key);
  } else if (key !== undefined) headers.set('authorization', `Bearer ${key}`);
  return headers;
}
