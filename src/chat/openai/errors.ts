import type { ErrorRequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { ToolrouterError } from '../../errors.js';
import { chatErrorReply } from '../core/errors.js';

/**
 * Error types as OpenAI's API uses them. The chat face answers in OpenAI's error format, not toolrouter's
 * `{error: {code, message}}`, because its callers are OpenAI SDKs that read `error.type` and `error.param`.
 */
export type OpenAiErrorType = 'invalid_request_error' | 'api_error' | 'server_error' | 'requests';

export interface OpenAiErrorBody {
  error: { message: string; type: OpenAiErrorType; param: string | null; code: string | null };
}

/** A ToolrouterError as the OpenAI face answers it, with OpenAI's type and code. */
export class OpenAiError extends ToolrouterError {
  override readonly name = 'OpenAiError';
  /** OpenAI's `code`, which may be null (OpenAI leaves it out for plain invalid requests). */
  readonly openAiCode: string | null;

  constructor(
    status: number,
    message: string,
    readonly type: OpenAiErrorType,
    param: string | null = null,
    code: string | null = null,
  ) {
    super(code ?? (status >= 500 ? 'internal' : 'invalid_request'), message, { status, ...(param === null ? {} : { param }) });
    this.openAiCode = code;
  }

  toBody(): OpenAiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param ?? null, code: this.openAiCode } };
  }
}

/**
 * OpenAI's names for toolrouter's codes where they differ. A plain invalid request has no code in OpenAI's errors
 * unless its thrower said why (src/chat/core/errors.ts invalidRequest).
 */
function openAiCode(error: ToolrouterError): string | null {
  switch (error.code) {
    case 'unauthorized':
      return error.reason === 'missing' ? 'missing_api_key' : 'invalid_api_key';
    case 'rate_limited':
      return 'rate_limit_exceeded';
    case 'invalid_request':
      return error.reason ?? null;
    case 'internal':
      return null;
    default:
      return error.code;
  }
}

/** The OpenAI-compatible face's mapping: any error as OpenAI's SDKs expect it. */
export function toOpenAiError(thrown: unknown): OpenAiError {
  if (thrown instanceof OpenAiError) return thrown;
  const { error, status, message, param } = chatErrorReply(thrown);
  const type: OpenAiErrorType =
    error.code === 'rate_limited' ? 'requests' : error.code === 'internal' ? 'server_error' : status >= 500 ? 'api_error' : 'invalid_request_error';
  return new OpenAiError(status, message, type, param, openAiCode(error));
}

/** Sends `error` in OpenAI's shape, with Retry-After where the caller may retry. */
export function sendOpenAiError(res: Response, error: unknown): void {
  const mapped = toOpenAiError(error);
  const source = error instanceof ToolrouterError ? error : undefined;
  const retryAfter = source?.retryAfterSeconds ?? (mapped.status === 503 ? 1 : undefined);
  if (retryAfter !== undefined) res.setHeader('Retry-After', String(retryAfter));
  res.status(mapped.status).json(mapped.toBody());
}

/** Maps errors of the chat routes to OpenAI-style bodies; unexpected ones are a 500 whose details stay in the log. */
export function openAiErrorHandler(log: Logger): ErrorRequestHandler {
  return (error, _req, res, next) => {
    // Mid-stream failures cannot change the status any more; Express's default handler closes the connection.
    if (res.headersSent) return next(error);
    if (toOpenAiError(error).status === 500) log.error({ err: error }, 'chat request failed');
    sendOpenAiError(res, error);
  };
}
