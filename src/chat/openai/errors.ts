import type { ErrorRequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { toToolrouterError, ToolrouterError } from '../../errors.js';

/**
 * Error types as OpenAI's API uses them. The chat face answers in OpenAI's error format, not toolrouter's
 * `{error: {code, message}}`, because its callers are OpenAI SDKs that read `error.type` and `error.param`.
 */
export type OpenAiErrorType = 'invalid_request_error' | 'api_error' | 'server_error' | 'requests';

export interface OpenAiErrorBody {
  error: { message: string; type: OpenAiErrorType; param: string | null; code: string | null };
}

/** A ToolrouterError raised by the chat face itself, with the OpenAI type and code it is answered with. */
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

export const invalidRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new OpenAiError(400, message, 'invalid_request_error', param, code);

/** OpenAI's names for toolrouter's codes where they differ; a plain invalid request has no code in OpenAI's errors. */
const OPENAI_CODES: Record<string, string | null> = { rate_limited: 'rate_limit_exceeded', invalid_request: null };

/** The OpenAI-compatible face's mapping: any error as OpenAI's SDKs expect it. */
export function toOpenAiError(error: unknown): OpenAiError {
  if (error instanceof OpenAiError) return error;
  const mapped = toToolrouterError(error);
  const param = mapped.param ?? null;
  switch (mapped.code) {
    case 'unauthorized':
      return new OpenAiError(401, mapped.message, 'invalid_request_error', param, mapped.reason === 'missing' ? 'missing_api_key' : 'invalid_api_key');
    case 'rate_limited':
      return new OpenAiError(429, mapped.message, 'requests', param, 'rate_limit_exceeded');
    case 'payload_too_large':
      return new OpenAiError(413, 'The request body is larger than the configured limit.', 'invalid_request_error', param, 'payload_too_large');
    case 'internal':
      return new OpenAiError(500, 'The server had an error while processing your request.', 'server_error');
  }
  const type: OpenAiErrorType = mapped.status >= 500 ? 'api_error' : 'invalid_request_error';
  const code = Object.hasOwn(OPENAI_CODES, mapped.code) ? (OPENAI_CODES[mapped.code] ?? null) : mapped.code;
  return new OpenAiError(mapped.status, mapped.message, type, param, code);
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

/**
 * Anthropic's error types by HTTP status (https://docs.anthropic.com/en/api/errors): the Anthropic face answers
 * `{"type": "error", "error": {"type", "message"}}`, which the Anthropic SDKs read.
 */
const ANTHROPIC_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function anthropicErrorBody(status: number, message: string): { type: 'error'; error: { type: string; message: string } } {
  return { type: 'error', error: { type: ANTHROPIC_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), message } };
}

/** Sends `error` in Anthropic's shape: the same status, message and Retry-After as the OpenAI face would give. */
export function sendAnthropicError(res: Response, error: unknown): void {
  const mapped = toOpenAiError(error);
  const source = error instanceof ToolrouterError ? error : undefined;
  const retryAfter = source?.retryAfterSeconds ?? (mapped.status === 503 ? 1 : undefined);
  if (retryAfter !== undefined) res.setHeader('Retry-After', String(retryAfter));
  const message = mapped.param ? `${mapped.message} (${mapped.param})` : mapped.message;
  res.status(mapped.status).json(anthropicErrorBody(mapped.status, mapped.param && mapped.message.includes(mapped.param) ? mapped.message : message));
}

export function anthropicErrorHandler(log: Logger): ErrorRequestHandler {
  return (error, _req, res, next) => {
    if (res.headersSent) return next(error);
    if (toOpenAiError(error).status === 500) log.error({ err: error }, 'Anthropic messages request failed');
    sendAnthropicError(res, error);
  };
}
