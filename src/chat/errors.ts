import type { ErrorRequestHandler } from 'express';
import type { Logger } from 'pino';
import { IndexNotReadyError } from '../search/search.js';

/**
 * Error types as OpenAI's API uses them. The chat face answers in OpenAI's error format, not toolrouter's
 * `{error: {code, message}}`, because its callers are OpenAI SDKs that read `error.type` and `error.param`.
 */
export type OpenAiErrorType = 'invalid_request_error' | 'api_error' | 'server_error';

export interface OpenAiErrorBody {
  error: { message: string; type: OpenAiErrorType; param: string | null; code: string | null };
}

export class OpenAiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: OpenAiErrorType,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }

  toBody(): OpenAiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const invalidRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new OpenAiError(400, message, 'invalid_request_error', param, code);

/** Maps errors of the chat routes to OpenAI-style bodies; unexpected ones are a 500 whose details stay in the log. */
export function openAiErrorHandler(log: Logger): ErrorRequestHandler {
  return (error, _req, res, next) => {
    // Mid-stream failures cannot change the status any more; Express's default handler closes the connection.
    if (res.headersSent) return next(error);
    const mapped = toOpenAiError(error);
    if (mapped.status === 500) log.error({ err: error }, 'chat request failed');
    if (mapped.status === 503) res.setHeader('Retry-After', '1');
    res.status(mapped.status).json(mapped.toBody());
  };
}

function toOpenAiError(error: unknown): OpenAiError {
  if (error instanceof OpenAiError) return error;
  if (error instanceof IndexNotReadyError) return new OpenAiError(503, error.message, 'api_error', null, 'index_not_ready');
  // body-parser marks its own errors with a type and a status.
  const parserError = error as { type?: string; status?: number; message?: string };
  if (parserError.type === 'entity.too.large') {
    return new OpenAiError(413, 'The request body is larger than the configured limit.', 'invalid_request_error', null, 'payload_too_large');
  }
  if (typeof parserError.status === 'number' && parserError.status >= 400 && parserError.status < 500) {
    return new OpenAiError(parserError.status, parserError.message ?? 'Bad request.', 'invalid_request_error');
  }
  return new OpenAiError(500, 'The server had an error while processing your request.', 'server_error');
}
