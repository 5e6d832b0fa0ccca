/**
 * Tasks a client asked for (MCP 2025-11-25, a task-augmented `tools/call`; the 2026-07-28 tasks extension; the REST
 * mirror): toolrouter answers at once with a task and runs the call in the background; the client polls `tasks/get`,
 * fetches `tasks/result`, may `tasks/cancel`, `tasks/update` and `tasks/list`. The 1.x SDK Server answers its four task
 * methods from an SDK `TaskStore`; `storeFor` is that store, over this module.
 *
 * The record of a task (status, result or error, input requests, owner, instance) is in a TaskStore
 * (src/state/tasks.ts: this process, or Redis), so any instance answers tasks/get, tasks/result and tasks/list. The
 * work runs on the instance that started it: a cancellation or an answer to its input requests arriving elsewhere is
 * sent there (src/state/instances.ts). A task whose instance is gone (killed) is ended `failed`, saying so, by the
 * first instance that reads it.
 *
 * A task belongs to one owner: the caller's key (or subject) and, on 2025-11-25, its session. Another owner gets "task
 * not found", exactly as for an id that never existed. Tasks are bounded per owner and in total, and are forgotten
 * `ttl` after creation (the requested ttl, capped); a task still running then is cancelled.
 */
import { randomBytes } from 'node:crypto';
import type { CreateTaskOptions, TaskStore as SdkTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { Result, Task } from '@modelcontextprotocol/sdk/types.js';
import type { Access } from '../../auth/access.js';
import { InstanceGoneError, LocalInstances, type InstanceRegistry } from '../../state/instances.js';
import { LocalRoundSecrets, type RoundSecrets } from '../../state/rounds.js';
import { MemoryTaskStore, TERMINAL_STATUSES, type InputRequests, type TaskEnd, type TaskRecord, type TaskStore } from '../../state/tasks.js';
import { TaskInputs } from './task-inputs.js';

export { TaskLimitError } from '../../state/tasks.js';

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

/** Where tasks' records live and how instances reach each other: in this process unless the assembly gives Redis ones. */
export interface GatewayTasksState {
  /** @defaultValue a MemoryTaskStore */
  store?: TaskStore;
  /** @defaultValue LocalInstances (this process only) */
  instances?: InstanceRegistry;
  /** The secret 2026-07-28 requestState is signed with (src/mcp/relay/rounds.ts); shared through Redis when scaled out. */
  roundSecrets?: RoundSecrets;
}

/** Whose tasks these are: the signed-in subject, else the key, else the kind of caller (admin, open service). */
export function ownerOf(access: Access): string {
  return access.subject ?? (access.key ? `key:${access.key.keyId}` : access.kind);
}

/** How long a message to the instance running a task (cancel, answers) may take before it counts as failed. */
const CONTROL_TIMEOUT_MS = 5_000;

/** The error of a task whose instance stopped before it ended: JSON-RPC internal error, with a message saying so. */
export function instanceLostMessage(instance: string): string {
  return `the toolrouter instance running this task (${instance}) stopped before the task finished; call the tool again`;
}

interface Running {
  abort: AbortController;
  expiry: NodeJS.Timeout;
}

export class GatewayTasks {
  readonly store: TaskStore;
  readonly instances: InstanceRegistry;
  readonly roundSecrets: RoundSecrets;
  /** What upstreams ask during 2026-07-28 tasks running here, until tasks/update answers it. */
  readonly inputs = new TaskInputs();
  /** The work of tasks running in this process. */
  private readonly running = new Map<string, Running>();

  constructor(
    private readonly options: GatewayTasksOptions = DEFAULT_TASKS_OPTIONS,
    state: GatewayTasksState = {},
  ) {
    this.store = state.store ?? new MemoryTaskStore();
    this.instances = state.instances ?? new LocalInstances();
    this.roundSecrets = state.roundSecrets ?? new LocalRoundSecrets();
    // Sent here by the instance a client's tasks/cancel or tasks/update reached.
    this.instances.handle('task.cancel', async (body) => {
      this.stop((body as { taskId: string }).taskId);
      return true;
    });
    this.instances.handle('task.answer', async (body) => {
      const { taskId, responses } = body as { taskId: string; responses: Record<string, unknown> };
      this.inputs.answer(taskId, responses);
      return true;
    });
  }

  /**
   * Starts `work` as a task of `owner`; returns the task as created (status working). The work gets a signal that
   * aborts when the task is cancelled, expires or its owner goes away; its result (or failure) is kept for tasks/result.
   * Refused with TaskLimitError when the owner or everyone holds too many.
   */
  async start(owner: string, requestedTtl: number | null | undefined, work: (signal: AbortSignal, taskId: string) => Promise<Result>): Promise<Task> {
    const ttl = Math.min(Math.max(1, requestedTtl ?? this.options.defaultTtlMs), this.options.maxTtlMs);
    const now = new Date().toISOString();
    const task: Task = { taskId: randomBytes(16).toString('hex'), status: 'working', ttl, createdAt: now, lastUpdatedAt: now, pollInterval: this.options.pollIntervalMs };
    await this.store.create({ task, owner, instance: this.instances.id }, this.options);
    const running: Running = { abort: new AbortController(), expiry: setTimeout(() => this.stop(task.taskId), ttl) };
    running.expiry.unref();
    this.running.set(task.taskId, running);
    void work(running.abort.signal, task.taskId)
      .then(
        (result) => this.end(task.taskId, { status: 'completed', result }),
        (error: unknown) => {
          const message = error instanceof Error ? error.message : String(error);
          const code = (error as { code?: unknown } | undefined)?.code;
          return this.end(task.taskId, {
            status: 'failed',
            result: failedResult(message),
            error: { code: typeof code === 'number' && Number.isSafeInteger(code) ? code : -32603, message },
            statusMessage: message,
          });
        },
      )
      .finally(() => {
        this.inputs.drop(task.taskId);
        this.forgetLocal(task.taskId);
      });
    return { ...task };
  }

  /**
   * An owner's task as it stands, or undefined (unknown, expired, another owner's). A task whose instance is gone is
   * ended `failed` here first, so every instance then reads the same failure.
   */
  async get(owner: string, taskId: string): Promise<TaskRecord | undefined> {
    const record = await this.store.get(taskId);
    if (!record || record.owner !== owner) return undefined;
    if (TERMINAL_STATUSES.has(record.task.status) || (await this.instances.isAlive(record.instance))) return record;
    const message = instanceLostMessage(record.instance);
    await this.store.finish(taskId, { status: 'failed', result: failedResult(message), error: { code: -32603, message }, statusMessage: message });
    return this.store.get(taskId);
  }

  /** The owner's tasks (oldest first), as tasks/list shows them; those of a gone instance read failed. */
  async list(owner: string): Promise<Task[]> {
    const tasks: Task[] = [];
    for (const record of await this.store.list(owner)) {
      const alive = TERMINAL_STATUSES.has(record.task.status) || (await this.instances.isAlive(record.instance));
      const task = alive ? record.task : (await this.get(owner, record.task.taskId))?.task;
      if (task) tasks.push(task);
    }
    return tasks;
  }

  /**
   * Cancels an owner's task: ended `cancelled` at once (whoever reads it next sees that), and its work stopped on the
   * instance running it. Undefined when the owner has no such task.
   */
  async cancel(owner: string, taskId: string, statusMessage?: string): Promise<TaskRecord | undefined> {
    const record = await this.get(owner, taskId);
    if (!record) return undefined;
    const ended = await this.store.finish(taskId, {
      status: 'cancelled',
      result: { content: [{ type: 'text', text: 'The task was cancelled before it finished.' }], isError: true },
      ...(statusMessage === undefined ? {} : { statusMessage }),
    });
    if (ended) await this.tell(record.instance, 'task.cancel', { taskId });
    return this.store.get(taskId);
  }

  /** Hands the client's answers to the input requests of an owner's running task; false when there is no such task. */
  async answer(owner: string, taskId: string, responses: Record<string, unknown>): Promise<boolean> {
    const record = await this.get(owner, taskId);
    if (!record) return false;
    if (!TERMINAL_STATUSES.has(record.task.status)) await this.tell(record.instance, 'task.answer', { taskId, responses });
    return true;
  }

  /** A running task's status (working ↔ input_required), with its outstanding input requests for any instance to show. */
  async progress(taskId: string, status: 'working' | 'input_required', inputRequests?: InputRequests): Promise<void> {
    await this.store.progress(taskId, status, inputRequests);
  }

  /**
   * The SDK TaskStore (1.x Server) of one owner: every lookup sees only that owner's tasks. `ownerFor` gets the
   * sessionId the SDK passes with each call (the 2025 session the request belongs to, on whichever instance).
   */
  storeFor(ownerFor: string | ((sessionId: string | undefined) => string)): SdkTaskStore {
    const owner = typeof ownerFor === 'string' ? () => ownerFor : ownerFor;
    return {
      createTask: async (_options: CreateTaskOptions) => {
        // Tasks are created by start(), which also runs the work; the SDK only calls this for handlers that ask for it.
        throw new Error('toolrouter creates tasks itself');
      },
      getTask: async (taskId, sessionId) => (await this.get(owner(sessionId), taskId))?.task ?? null,
      storeTaskResult: async (taskId, status, result, sessionId) => {
        if (await this.get(owner(sessionId), taskId)) await this.store.finish(taskId, { status, result });
      },
      getTaskResult: async (taskId, sessionId) => {
        const record = await this.get(owner(sessionId), taskId);
        if (!record) throw new Error(`Task not found: ${taskId}`);
        if (record.result === undefined) throw new Error(`Task ${taskId} has no result yet`);
        return record.result;
      },
      updateTaskStatus: async (taskId, status, statusMessage, sessionId) => {
        if (status === 'cancelled') {
          await this.cancel(owner(sessionId), taskId, statusMessage);
          return;
        }
        if (status === 'working' || status === 'input_required') await this.progress(taskId, status);
      },
      listTasks: async (_cursor, sessionId) => ({ tasks: await this.list(owner(sessionId)) }),
    };
  }

  /** Cancels and forgets every task of an owner (its session ended). */
  async dropOwner(owner: string): Promise<void> {
    for (const record of await this.store.list(owner)) {
      if (!TERMINAL_STATUSES.has(record.task.status)) await this.tell(record.instance, 'task.cancel', { taskId: record.task.taskId });
      await this.store.delete(record.task.taskId);
    }
  }

  /** Tasks whose work runs in this process. */
  get size(): number {
    return this.running.size;
  }

  /**
   * Shutting down: tasks running here end `failed`, saying why (written before their work is stopped, so the abort's
   * own failure does not replace the message); an instance killed without this is found out by its lost heartbeat.
   */
  close(): void {
    const message = `the toolrouter instance running this task (${this.instances.id}) shut down before the task finished; call the tool again`;
    for (const taskId of [...this.running.keys()]) {
      const ended = this.end(taskId, { status: 'failed', result: failedResult(message), error: { code: -32603, message }, statusMessage: message });
      void ended.finally(() => this.stop(taskId));
    }
  }

  private async end(taskId: string, end: TaskEnd): Promise<void> {
    // A cancelled task stays cancelled when its work ends afterwards (finish writes once).
    await this.store.finish(taskId, end).catch(() => {});
  }

  /** A message to the instance running a task; a gone instance needs none (its task reads failed or ended already). */
  private async tell(instance: string, topic: string, body: unknown): Promise<void> {
    try {
      await this.instances.ask(instance, topic, body, CONTROL_TIMEOUT_MS);
    } catch (error) {
      if (!(error instanceof InstanceGoneError)) throw error;
    }
  }

  /** Stops the work of a task running here (cancelled, expired, shutting down). */
  private stop(taskId: string): void {
    const running = this.running.get(taskId);
    if (!running) return;
    running.abort.abort();
    this.inputs.drop(taskId);
    this.forgetLocal(taskId);
  }

  private forgetLocal(taskId: string): void {
    const running = this.running.get(taskId);
    if (!running) return;
    clearTimeout(running.expiry);
    this.running.delete(taskId);
  }
}

function failedResult(message: string): Result {
  return { content: [{ type: 'text', text: `The task failed: ${message}` }], isError: true };
}
