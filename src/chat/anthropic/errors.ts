import type { ErrorRequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { chatErrorReply } from '../core/errors.js';

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
  const { status, message, param, retryAfterSeconds } = chatErrorReply(error);
  if (retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(retryAfterSeconds));
  // Anthropic's errors have no `param`: the field at fault is named in the message, unless it already is.
  res.status(status).json(anthropicErrorBody(status, param && !message.includes(param) ? `${message} (${param})` : message));
}

export function anthropicErrorHandler(log: Logger): ErrorRequestHandler {
  return (error, _req, res, next) => {
    if (res.headersSent) return next(error);
    if (chatErrorReply(error).status === 500) log.error({ err: error }, 'Anthropic messages request failed');
    sendAnthropicError(res, error);
  };
}
