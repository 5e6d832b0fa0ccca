import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { isRedisErrorText, REDIS_UNAVAILABLE_MESSAGE } from '../../redis/connection.js';

/**
 * A JSON-RPC error whose wire message is the bare message. The SDK puts `MCP error <code>: ` into McpError's message and
 * sends that message as it is; the receiving SDK client adds the prefix again, so clients read
 * "MCP error -32602: MCP error -32602: unknown tool". With the bare message they read the prefix once.
 */
export class RpcError extends McpError {
  constructor(code: number, message: string, data?: unknown) {
    super(code, message, data);
    this.message = message;
  }
}

/**
 * The message without the "MCP error <code>: " the 1.x SDK's McpError puts before it (once or, relayed, more often):
 * the wire carries the code in its own field, and the receiving client adds the prefix itself.
 */
export function bareMessage(code: number, message: string): string {
  const prefix = `MCP error ${code}: `;
  let bare = message;
  while (bare.startsWith(prefix)) bare = bare.slice(prefix.length);
  return bare;
}

/** A JSON-RPC server error's code for "a shared dependency is away for a moment; retry" (data.retryable says so). */
export const RETRYABLE_SERVER_ERROR = -32000;

/**
 * A JSON-RPC message about to be sent, with an error's message bare (see bareMessage), and never Redis's own error
 * text: an error whose message is Redis's or ioredis's (an OOM reply, a dropped connection) goes out as a retryable
 * server error saying so in plain words, with `data: {code: "redis_unavailable", retryable: true}`.
 */
export function withBareError<T>(message: T): T {
  const error = (message as { error?: { code?: unknown; message?: unknown } }).error;
  if (!error || typeof error.code !== 'number' || typeof error.message !== 'string') return message;
  if (isRedisErrorText(bareMessage(error.code, error.message))) {
    return { ...message, error: { code: RETRYABLE_SERVER_ERROR, message: REDIS_UNAVAILABLE_MESSAGE, data: { code: 'redis_unavailable', retryable: true } } } as T;
  }
  const bare = bareMessage(error.code, error.message);
  return bare === error.message ? message : ({ ...message, error: { ...error, message: bare } } as T);
}
