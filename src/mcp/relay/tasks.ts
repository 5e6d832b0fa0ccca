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
 * A task's last writes (its status, its end) are this instance's to make: one that fails while Redis is away (restarting,
 * failing over, out of memory) is kept, in order, and written when Redis answers again (PendingTaskWrites below), so a
 * task made before a Redis restart still ends with the result its work gave.
 *
 * A task belongs to one owner: the caller's key (or subject) and, on 2025-11-25, its session. Another owner gets "task
 * not found", exactly as for an id that never existed. Tasks are bounded per owner and in total, and are forgotten
 * `ttl` after creation (the requested ttl, capped); a task still running then is cancelled.
 */
import { randomBytes } from 'node:crypto';
import type { CreateTaskOptions, TaskStore as SdkTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { Result, Task } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
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
  /**
   * Status and result writes kept while Redis is away, at most (the oldest status changes go first, then the oldest
   * writes of any kind, logged).
   * @defaultValue 10000
   */
  maxPendingWrites?: number;
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
  /** Where writes kept for later are reported. */
  log?: Pick<Logger, 'warn' | 'info'>;
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
  /** Status and result writes that Redis refused or did not answer, written again, in order, once it does. */
  readonly pending: PendingTaskWrites;

  constructor(
    private readonly options: GatewayTasksOptions = DEFAULT_TASKS_OPTIONS,
    state: GatewayTasksState = {},
  ) {
    this.store = state.store ?? new MemoryTaskStore();
    this.instances = state.instances ?? new LocalInstances();
    this.roundSecrets = state.roundSecrets ?? new LocalRoundSecrets();
    this.pending = new PendingTaskWrites(this.store, options.maxPendingWrites ?? 10_000, state.log);
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
    this.pending.expiresAt.set(task.taskId, Date.now() + ttl);
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
    this.pending.write({ taskId, kind: 'progress', status, ...(inputRequests === undefined ? {} : { inputRequests }) });
    await this.pending.settled(taskId);
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
    // A cancelled task stays cancelled when its work ends afterwards (finish writes once). Kept for later while Redis
    // is away; this resolves once written or kept.
    this.pending.write({ taskId, kind: 'finish', end });
    await this.pending.settled(taskId);
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

/** A status or result write of a task running here, as kept until the store takes it. */
export type TaskWrite =
  | { taskId: string; kind: 'progress'; status: 'working' | 'input_required'; inputRequests?: InputRequests }
  | { taskId: string; kind: 'finish'; end: TaskEnd };

/** Waits after a failed write, doubling up to this bound: a task's end is written at most this long after Redis is back. */
const MAX_RETRY_DELAY_MS = 1_000;

/**
 * The writes tasks running in this process make (status changes, ends), in the order they were made. Each is tried at
 * once; one that fails (Redis restarting, failing over, out of memory, unreachable) stays, and so does every later one
 * (the order of a task's writes is its history), retried with a growing delay until Redis takes them. Bounded: beyond
 * `max`, the oldest status change goes first (its task's end, if any, still follows), else the oldest write. A write
 * for a task past its ttl is dropped (the record is gone with it).
 */
export class PendingTaskWrites {
  private readonly queue: TaskWrite[] = [];
  /** Each task's expiry (ms), so a write kept beyond it is dropped; set by GatewayTasks.start. */
  readonly expiresAt = new Map<string, number>();
  private flushing: Promise<void> | undefined;
  private delayMs = 0;
  private readonly waiters = new Map<string, (() => void)[]>();
  private dropped = 0;

  constructor(
    private readonly store: TaskStore,
    private readonly max: number,
    private readonly log?: Pick<Logger, 'warn' | 'info'>,
  ) {}

  /** Writes kept, not yet taken by the store. */
  get size(): number {
    return this.queue.length;
  }

  /** Queues a write and starts writing; `settled` tells when it was written or found unwritable for now. */
  write(write: TaskWrite): void {
    if (this.queue.length >= this.max) this.shed();
    this.queue.push(write);
    this.flush();
  }

  /** Resolves once every kept write is written (true), or after `timeoutMs` with some still kept (false). */
  async flushed(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    return this.queue.length === 0;
  }

  /** Resolves once `taskId` has no write in flight: written, or kept for later because Redis refused it. */
  settled(taskId: string): Promise<void> {
    if (!this.queue.some((write) => write.taskId === taskId)) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.waiters.get(taskId) ?? [];
      list.push(resolve);
      this.waiters.set(taskId, list);
    });
  }

  private flush(): void {
    if (this.flushing) return;
    this.flushing = this.drain().finally(() => {
      this.flushing = undefined;
      if (this.queue.length > 0) this.flush();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const write = this.queue[0]!;
      if ((this.expiresAt.get(write.taskId) ?? Infinity) <= Date.now()) {
        this.queue.shift();
        this.release(write.taskId);
        continue;
      }
      try {
        if (write.kind === 'finish') await this.store.finish(write.taskId, write.end);
        else await this.store.progress(write.taskId, write.status, write.inputRequests);
      } catch (error) {
        if (!transient(error)) {
          // Refused for what it is (a script error), not because Redis is away: retrying would hold every later write.
          this.log?.warn({ err: error, taskId: write.taskId }, 'task status not written: refused by the store; dropped');
          this.queue.shift();
          this.release(write.taskId);
          continue;
        }
        // Every waiting task hears "kept": its caller goes on; the write follows when Redis is back.
        for (const taskId of [...this.waiters.keys()]) this.wake(taskId);
        if (this.delayMs === 0) this.log?.warn({ err: error, pending: this.queue.length }, 'task status not written (Redis unavailable); kept and retried until Redis answers');
        this.delayMs = Math.min(Math.max(this.delayMs * 2, 50), MAX_RETRY_DELAY_MS);
        const delay = this.delayMs;
        await new Promise((resolve) => setTimeout(resolve, delay).unref());
        continue;
      }
      if (this.delayMs > 0) this.log?.info({ pending: this.queue.length - 1 }, 'kept task writes are being written again');
      this.delayMs = 0;
      this.queue.shift();
      if (write.kind === 'finish') this.expiresAt.delete(write.taskId);
      this.release(write.taskId);
    }
  }

  /** Wakes the waiters of a task once none of its writes remain. */
  private release(taskId: string): void {
    if (!this.queue.some((write) => write.taskId === taskId)) this.wake(taskId);
  }

  private wake(taskId: string): void {
    const list = this.waiters.get(taskId);
    this.waiters.delete(taskId);
    for (const resolve of list ?? []) resolve();
  }

  private shed(): void {
    const progress = this.queue.findIndex((write, index) => index > 0 && write.kind === 'progress');
    const [dropped] = this.queue.splice(progress > 0 ? progress : 1, 1);
    this.dropped++;
    if (dropped) this.release(dropped.taskId);
    if (this.dropped === 1 || this.dropped % 1000 === 0) this.log?.warn({ dropped: this.dropped, max: this.max }, 'too many task writes kept while Redis is away; the oldest were dropped');
  }
}

/**
 * Whether a store error means Redis is away for now (the write may succeed later): anything but an error reply, and
 * the error replies of a Redis that cannot write yet (out of memory, loading its data, a replica or a cluster without
 * a master). Redis's error replies reach here as the cause of the store's RedisUnavailableError.
 */
function transient(error: unknown): boolean {
  for (let cause = error; cause instanceof Error; cause = cause.cause) {
    if (cause.name === 'ReplyError') return /^(OOM|READONLY|LOADING|BUSY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|MOVED|ASK|NOREPLICAS)\b/.test(cause.message);
  }
  return true;
}

function failedResult(message: string): Result {
  return { content: [{ type: 'text', text: `The task failed: ${message}` }], isError: true };
}
