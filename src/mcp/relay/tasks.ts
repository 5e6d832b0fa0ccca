/**
 * Tasks a client asked for (MCP 2025-11-25, a task-augmented `tools/call`): toolrouter answers at once with a task and
 * runs the call in the background; the client polls `tasks/get`, fetches `tasks/result`, may `tasks/cancel` and
 * `tasks/list`. The 1.x SDK Server answers those four methods from a `TaskStore` it is given; this module is that store.
 *
 * A task belongs to one owner: the caller's key (or subject) AND its connection. Another key, or the same key on
 * another session, gets "task not found", exactly as for an id that never existed. Tasks live in this process, bounded
 * per owner and in total, and are forgotten `ttl` after creation (the requested ttl, capped); a task still running then
 * is cancelled. When the connection closes, its tasks are cancelled and forgotten (nobody can ask for them any more).
 */
import { randomBytes } from 'node:crypto';
import type { CreateTaskOptions, TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { Result, Task } from '@modelcontextprotocol/sdk/types.js';
import type { Access } from '../../auth/access.js';
import { ToolrouterError } from '../../errors.js';

/** The store's bounds (mcp.tasks in the configuration: maxPerSession is maxPerOwner, an owner being key + session). */
export interface GatewayTasksOptions {
  /** Tasks one owner may hold at once (running or finished, until they expire). */
  maxPerOwner: number;
  /** Tasks all owners together may hold. */
  maxTotal: number;
  /** The ttl when the client gives none, and the most it may ask for. */
  defaultTtlMs: number;
  maxTtlMs: number;
  /** What toolrouter suggests between two tasks/get. */
  pollIntervalMs: number;
}

export const DEFAULT_TASKS_OPTIONS: GatewayTasksOptions = {
  maxPerOwner: 100,
  maxTotal: 10_000,
  defaultTtlMs: 10 * 60_000,
  maxTtlMs: 60 * 60_000,
  pollIntervalMs: 500,
};

/** Whose tasks these are: the signed-in subject, else the key, else the kind of caller (admin, open service). */
export function ownerOf(access: Access): string {
  return access.subject ?? (access.key ? `key:${access.key.keyId}` : access.kind);
}

/** The store refuses a task: too many held (code `busy`). The MCP face turns it into a JSON-RPC error. */
export class TaskLimitError extends ToolrouterError {
  constructor(message: string) {
    super('busy', message);
  }
}

interface Entry {
  owner: string;
  task: Task;
  result: Result | undefined;
  /** Why the work failed, as a JSON-RPC error (the 2026-07-28 extension shows it on a failed task). */
  error?: { code: number; message: string };
  abort: AbortController;
  expiry: NodeJS.Timeout;
}

const TERMINAL = new Set<Task['status']>(['completed', 'failed', 'cancelled']);

export class GatewayTasks {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly options: GatewayTasksOptions = DEFAULT_TASKS_OPTIONS) {}

  /**
   * Starts `work` as a task of `owner`; returns the task as created (status working). The work gets a signal that
   * aborts when the task is cancelled, expires or its owner goes away; its result (or failure) is kept for tasks/result.
   */
  start(owner: string, requestedTtl: number | null | undefined, work: (signal: AbortSignal, taskId: string) => Promise<Result>): Task {
    this.makeRoom(owner);
    const ttl = Math.min(Math.max(1, requestedTtl ?? this.options.defaultTtlMs), this.options.maxTtlMs);
    const now = new Date().toISOString();
    const task: Task = { taskId: randomBytes(16).toString('hex'), status: 'working', ttl, createdAt: now, lastUpdatedAt: now, pollInterval: this.options.pollIntervalMs };
    const entry: Entry = { owner, task, result: undefined, abort: new AbortController(), expiry: setTimeout(() => this.forget(task.taskId), ttl) };
    entry.expiry.unref();
    this.entries.set(task.taskId, entry);
    void work(entry.abort.signal, task.taskId).then(
      (result) => this.finish(entry, 'completed', result),
      (error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        const code = (error as { code?: unknown } | undefined)?.code;
        if (!TERMINAL.has(entry.task.status)) entry.error = { code: typeof code === 'number' && Number.isSafeInteger(code) ? code : -32603, message };
        this.finish(entry, 'failed', undefined, message);
      },
    );
    return { ...task };
  }

  /** Why an owner's failed task failed (a JSON-RPC error); undefined for another owner's task or one that did not fail. */
  failureOf(owner: string, taskId: string): { code: number; message: string } | undefined {
    const entry = this.entries.get(taskId);
    return entry?.owner === owner && entry.task.status === 'failed' ? entry.error : undefined;
  }

  /** The SDK TaskStore of one owner: every lookup sees only that owner's tasks (the SDK's sessionId is not used). */
  storeFor(owner: string): TaskStore {
    const mine = (taskId: string): Entry | undefined => {
      const entry = this.entries.get(taskId);
      return entry?.owner === owner ? entry : undefined;
    };
    return {
      createTask: async (_options: CreateTaskOptions) => {
        // Tasks are created by start(), which also runs the work; the SDK only calls this for handlers that ask for it.
        throw new Error('toolrouter creates tasks itself');
      },
      getTask: async (taskId) => {
        const entry = mine(taskId);
        return entry ? { ...entry.task } : null;
      },
      storeTaskResult: async (taskId, status, result) => {
        const entry = mine(taskId);
        if (entry) this.finish(entry, status, result);
      },
      getTaskResult: async (taskId) => {
        const entry = mine(taskId);
        if (!entry) throw new Error(`Task not found: ${taskId}`);
        if (entry.result === undefined) throw new Error(`Task ${taskId} has no result yet`);
        return entry.result;
      },
      updateTaskStatus: async (taskId, status, statusMessage) => {
        const entry = mine(taskId);
        if (!entry || TERMINAL.has(entry.task.status)) return;
        if (status === 'cancelled') {
          this.finish(entry, 'cancelled', { content: [{ type: 'text', text: 'The task was cancelled before it finished.' }], isError: true }, statusMessage);
          entry.abort.abort();
          return;
        }
        this.update(entry, status, statusMessage);
      },
      listTasks: async () => ({
        tasks: [...this.entries.values()].filter((entry) => entry.owner === owner).map((entry) => ({ ...entry.task })),
      }),
    };
  }

  /** Cancels and forgets every task of an owner (its connection closed). */
  dropOwner(owner: string): void {
    for (const [taskId, entry] of this.entries) if (entry.owner === owner) this.forget(taskId);
  }

  get size(): number {
    return this.entries.size;
  }

  close(): void {
    for (const taskId of [...this.entries.keys()]) this.forget(taskId);
  }

  /** Room for one more task of `owner`: its oldest finished task goes first; with none finished, the task is refused. */
  private makeRoom(owner: string): void {
    const owned = [...this.entries.values()].filter((entry) => entry.owner === owner);
    if (owned.length >= this.options.maxPerOwner) {
      const finished = owned.find((entry) => TERMINAL.has(entry.task.status));
      if (!finished) throw new TaskLimitError(`at most ${this.options.maxPerOwner} tasks may run at once per session; wait for one to finish or cancel one`);
      this.forget(finished.task.taskId);
    }
    if (this.entries.size >= this.options.maxTotal) throw new TaskLimitError(`toolrouter holds ${this.options.maxTotal} tasks already; try again later`);
  }

  private finish(entry: Entry, status: 'completed' | 'failed' | 'cancelled', result: Result | undefined, message?: string): void {
    // A cancelled task stays cancelled when its work ends afterwards.
    if (TERMINAL.has(entry.task.status)) return;
    entry.result = result ?? { content: [{ type: 'text', text: `The task failed: ${message ?? 'unknown error'}` }], isError: true };
    this.update(entry, status, message);
  }

  private update(entry: Entry, status: Task['status'], statusMessage?: string): void {
    entry.task = { ...entry.task, status, lastUpdatedAt: new Date().toISOString(), ...(statusMessage === undefined ? {} : { statusMessage }) };
  }

  private forget(taskId: string): void {
    const entry = this.entries.get(taskId);
    if (!entry) return;
    clearTimeout(entry.expiry);
    entry.abort.abort();
    this.entries.delete(taskId);
  }
}
