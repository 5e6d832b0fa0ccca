/**
 * The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on toolrouter's modern face: a task's
 * shape on that revision, and the input requests of running tasks. There, a server asks nothing of the client while
 * a task runs; what an upstream asks during the task (elicitation, sampling, roots) becomes an entry of the task's
 * `inputRequests` (shown by tasks/get, status input_required), and the client answers with tasks/update
 * `inputResponses` under the same key. Keys are random and never reused within a task, as the extension requires.
 */
import { randomUUID } from 'node:crypto';
import type { Result, Task } from '@modelcontextprotocol/sdk/types.js';
import type { ClientChannel, RelayedRequestMethod, RelayFeature } from './channel.js';

/** The extension's identifier, as clients and servers declare it under `capabilities.extensions`. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** Whether a request's client capabilities (the `_meta` envelope's) declare the tasks extension. */
export function declaresTasks(capabilities: unknown): boolean {
  const extensions = (capabilities as { extensions?: Record<string, unknown> } | undefined)?.extensions;
  return typeof extensions === 'object' && extensions !== null && extensions[TASKS_EXTENSION] !== undefined;
}

interface Question {
  method: RelayedRequestMethod;
  params: Record<string, unknown>;
  answer(result: Record<string, unknown>): void;
  fail(error: Error): void;
}

/**
 * A task as the extension shows it (tasks/get, CreateTaskResult): `ttlMs` and `pollIntervalMs` for the 2025 names,
 * with the status's own payload inlined: the outstanding input requests, the result, or the JSON-RPC error.
 */
export function detailedTask(
  task: Task,
  extra: { inputRequests?: Record<string, { method: string; params: Record<string, unknown> }>; result?: Result; error?: { code: number; message: string } },
): Record<string, unknown> {
  return {
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage === undefined ? {} : { statusMessage: task.statusMessage }),
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: task.ttl,
    ...(task.pollInterval === undefined ? {} : { pollIntervalMs: task.pollInterval }),
    ...(task.status === 'input_required' ? { inputRequests: extra.inputRequests ?? {} } : {}),
    ...(task.status === 'completed' && extra.result ? { result: extra.result } : {}),
    ...(task.status === 'failed' ? { error: extra.error ?? { code: -32603, message: task.statusMessage ?? 'the task failed' } } : {}),
  };
}

/** Outstanding input requests of running 2026-07-28 tasks, by task id (the task store checks whose a task is). */
export class TaskInputs {
  private readonly pending = new Map<string, Map<string, Question>>();

  /**
   * The channel of a task's upstream call: requests wait as input requests (status input_required) until tasks/update
   * answers them, the task ends, or the call gives up. Log messages have no place on this revision's tasks (the
   * extension does not carry them): they stay in toolrouter's log.
   */
  channel(taskId: string, supports: (feature: RelayFeature) => boolean, status: (status: 'working' | 'input_required') => void): ClientChannel {
    return {
      id: `task:${taskId}`,
      supports,
      request: (method, params, signal) =>
        new Promise((answer, fail) => {
          const questions = this.pending.get(taskId) ?? new Map<string, Question>();
          this.pending.set(taskId, questions);
          const key = randomUUID();
          const settle = () => {
            questions.delete(key);
            if (questions.size === 0) {
              this.pending.delete(taskId);
              status('working');
            }
          };
          const gaveUp = () => {
            settle();
            fail(new Error('the task ended before the client answered'));
          };
          questions.set(key, {
            method,
            params,
            answer: (result) => {
              signal.removeEventListener('abort', gaveUp);
              settle();
              answer(result);
            },
            fail: (error) => {
              signal.removeEventListener('abort', gaveUp);
              settle();
              fail(error);
            },
          });
          signal.addEventListener('abort', gaveUp, { once: true });
          status('input_required');
        }),
      notify: () => {},
    };
  }

  /** The task's outstanding requests, keyed as the client must answer them. */
  outstanding(taskId: string): Record<string, { method: string; params: Record<string, unknown> }> {
    const questions = this.pending.get(taskId);
    return Object.fromEntries([...(questions ?? new Map<string, Question>())].map(([key, question]) => [key, { method: question.method, params: question.params }]));
  }

  /** Answers outstanding requests; keys that are not outstanding (unknown, answered already) are ignored. */
  answer(taskId: string, responses: Record<string, unknown>): void {
    const questions = this.pending.get(taskId);
    if (!questions) return;
    for (const [key, response] of Object.entries(responses)) {
      const question = questions.get(key);
      if (question && typeof response === 'object' && response !== null && !Array.isArray(response)) question.answer(response as Record<string, unknown>);
    }
  }

  /** The task ended: its outstanding requests fail (their upstream call is over anyway). */
  drop(taskId: string): void {
    const questions = this.pending.get(taskId);
    if (!questions) return;
    for (const question of [...questions.values()]) question.fail(new Error('the task ended'));
    this.pending.delete(taskId);
  }
}
