import { toToolrouterError, ToolrouterError } from '../../errors.js';

/**
 * The chat face's errors, whatever API asked: the core throws ToolrouterErrors (src/errors.ts) and each dialect answers
 * them in its own wire shape (src/chat/openai/errors.ts, src/chat/anthropic/errors.ts).
 */

/**
 * A request the caller must fix (HTTP 400). `param` names the field or header at fault; `reason` says more precisely
 * what is wrong (`invalid_json`, `invalid_value`, `duplicate_tool_name`, `invalid_header`...), which OpenAI's errors
 * carry as their `code`.
 */
export const invalidRequest = (message: string, param: string | null = null, reason: string | null = null): ToolrouterError =>
  new ToolrouterError('invalid_request', message, { ...(param === null ? {} : { param }), ...(reason === null ? {} : { reason }) });

/** Any error as the LLM-API faces answer it, before each names it its own way. */
export interface ChatErrorReply {
  /** The error as a ToolrouterError: its code (and reason) say what happened. */
  error: ToolrouterError;
  status: number;
  message: string;
  param: string | null;
  /** Sent as Retry-After: the thrower's, or 1 s for any 503. */
  retryAfterSeconds?: number;
}

/**
 * What the caller is told: unauthorized is a 401, rate limits a 429, an oversized body a 413, and an internal error a
 * 500 whose details stay in the log; anything else keeps its status, message and param.
 */
export function chatErrorReply(thrown: unknown): ChatErrorReply {
  const error = toToolrouterError(thrown);
  const param = error.param ?? null;
  let reply: ChatErrorReply;
  switch (error.code) {
    case 'unauthorized':
      reply = { error, status: 401, message: error.message, param };
      break;
    case 'rate_limited':
      reply = { error, status: 429, message: error.message, param };
      break;
    case 'payload_too_large':
      reply = { error, status: 413, message: 'The request body is larger than the configured limit.', param };
      break;
    case 'internal':
      reply = { error, status: 500, message: 'The server had an error while processing your request.', param: null };
      break;
    default:
      reply = { error, status: error.status, message: error.message, param };
  }
  const retryAfter = (thrown instanceof ToolrouterError ? thrown.retryAfterSeconds : undefined) ?? (reply.status === 503 ? 1 : undefined);
  return retryAfter === undefined ? reply : { ...reply, retryAfterSeconds: retryAfter };
}
