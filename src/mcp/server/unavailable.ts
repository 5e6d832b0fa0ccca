/**
 * Shared state (Redis) that does not answer for a moment — restarting, failing over, out of memory — as the MCP faces
 * say it: a JSON-RPC server error with its own code and `data.retryable`, like -32010 for a round whose instance is
 * gone, so a client tells it from a mistake of its own and asks again. Redis's own error text never reaches a client
 * (it is logged where it happened).
 */
import type { TaskStore as SdkTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import { ToolrouterError } from '../../errors.js';
import { RpcError } from './rpc-error.js';

/** JSON-RPC code: the request could not be served because toolrouter's shared state did not answer; retry it. */
export const SHARED_STATE_UNAVAILABLE = -32011;

export const SHARED_STATE_MESSAGE = "toolrouter's shared state (Redis) is unavailable for a moment; retry the request";

/** What the error carries in `data`: retry, and after about how long. */
export const SHARED_STATE_DATA = { retryable: true, retryAfterMs: 1_000 } as const;

/** Whether an error means Redis did not answer (src/redis/connection.ts RedisUnavailableError). */
export function isSharedStateUnavailable(error: unknown): boolean {
  return error instanceof ToolrouterError && error.code === 'redis_unavailable';
}

/** The error as the 1.x SDK's McpError (the 2026 face's v2 wrapper turns it into a ProtocolError with the same fields). */
export function sharedStateError(): RpcError {
  return new RpcError(SHARED_STATE_UNAVAILABLE, SHARED_STATE_MESSAGE, { ...SHARED_STATE_DATA });
}

/** Runs `work`, answering a Redis outage with the retryable error instead of its raw message. */
export async function retryable<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isSharedStateUnavailable(error)) throw sharedStateError();
    throw error;
  }
}

/** The 1.x SDK's TaskStore with every method's Redis outage answered as the retryable error (tasks/get, result, cancel). */
export function retryableTaskStore(store: SdkTaskStore): SdkTaskStore {
  return {
    createTask: (...args) => retryable(() => store.createTask(...args)),
    getTask: (...args) => retryable(() => store.getTask(...args)),
    storeTaskResult: (...args) => retryable(() => store.storeTaskResult(...args)),
    getTaskResult: (...args) => retryable(() => store.getTaskResult(...args)),
    updateTaskStatus: (...args) => retryable(() => store.updateTaskStatus(...args)),
    listTasks: (...args) => retryable(() => store.listTasks(...args)),
  };
}
