/**
 * Where tasks' records live (2025-11-25 task-augmented calls, the 2026-07-28 tasks extension, the REST mirror's): the
 * status, the result or the error, the outstanding input requests, the owner and the instance running the work. Any
 * instance reads them (tasks/get, tasks/result, tasks/list); only the instance running a task writes its progress,
 * and a task ends once: the first `finish` wins (a cancellation racing the work's end, on two instances), later ones
 * are ignored. The running work itself stays in its process (src/mcp/relay/tasks.ts).
 *
 * Contract (both implementations, test/unit/state/tasks.test.ts):
 * - a record is forgotten `task.ttl` ms after creation (then `get` answers undefined, and `list` leaves it out);
 * - `create` refuses (TaskLimitError) when the owner holds `maxPerOwner` tasks none of which has ended, or all owners
 *   together hold `maxTotal`; an owner at its bound with an ended task loses its oldest ended task instead;
 * - `progress` and `finish` do nothing to a task that has ended or is gone;
 * - `list` is the owner's tasks, oldest first; ids are the store's callers' (random, unguessable).
 */
import type { Result, Task } from '@modelcontextprotocol/sdk/types.js';
import { ToolrouterError } from '../errors.js';

/** What an upstream asked during a task, keyed as the client must answer it (the 2026-07-28 extension's inputRequests). */
export type InputRequests = Record<string, { method: string; params: Record<string, unknown> }>;

export interface TaskRecord {
  task: Task;
  /** Whose task it is (src/mcp/relay/tasks.ts ownerOf, with the revision or session): only they may see it. */
  owner: string;
  /** The instance running the work (src/state/instances.ts): cancellation and answers go there. */
  instance: string;
  result?: Result;
  /** Why the work failed, as a JSON-RPC error (the 2026-07-28 extension shows it on a failed task). */
  error?: { code: number; message: string };
  /** Outstanding input requests while the status is input_required. */
  inputRequests?: InputRequests;
}

export interface TaskEnd {
  status: 'completed' | 'failed' | 'cancelled';
  result: Result;
  error?: { code: number; message: string };
  statusMessage?: string;
}

export interface TaskLimits {
  maxPerOwner: number;
  maxTotal: number;
}

/** The store refuses a task: too many held (code `busy`). The MCP face turns it into a JSON-RPC error. */
export class TaskLimitError extends ToolrouterError {
  constructor(message: string) {
    super('busy', message);
  }
}

export interface TaskStore {
  /** Stores a new task (status working), within the limits (see the contract above). */
  create(record: TaskRecord, limits: TaskLimits): Promise<void>;
  get(taskId: string): Promise<TaskRecord | undefined>;
  /** A running task's status changed (working ↔ input_required) with its outstanding input requests. */
  progress(taskId: string, status: 'working' | 'input_required', inputRequests: InputRequests | undefined): Promise<void>;
  /** Ends a task, once: true when this call ended it, false when it had ended already (or is gone). */
  finish(taskId: string, end: TaskEnd): Promise<boolean>;
  list(owner: string): Promise<TaskRecord[]>;
  delete(taskId: string): Promise<void>;
  close(): Promise<void>;
}

export const TERMINAL_STATUSES: ReadonlySet<Task['status']> = new Set(['completed', 'failed', 'cancelled']);

export function tooManyMessage(kind: 'owner' | 'total', limits: TaskLimits): string {
  return kind === 'owner'
    ? `at most ${limits.maxPerOwner} tasks may run at once per session; wait for one to finish or cancel one`
    : `toolrouter holds ${limits.maxTotal} tasks already; try again later`;
}

interface Held {
  record: TaskRecord;
  expiresAt: number;
}

/** Tasks in this process (no Redis): forgotten at their expiry, checked on every access. */
export class MemoryTaskStore implements TaskStore {
  private readonly held = new Map<string, Held>();

  async create(record: TaskRecord, limits: TaskLimits): Promise<void> {
    this.sweep();
    const owned = [...this.held.values()].filter((held) => held.record.owner === record.owner);
    if (owned.length >= limits.maxPerOwner) {
      const ended = owned.find((held) => TERMINAL_STATUSES.has(held.record.task.status));
      if (!ended) throw new TaskLimitError(tooManyMessage('owner', limits));
      this.held.delete(ended.record.task.taskId);
    }
    if (this.held.size >= limits.maxTotal) throw new TaskLimitError(tooManyMessage('total', limits));
    this.held.set(record.task.taskId, { record: structuredClone(record), expiresAt: Date.now() + record.task.ttl! });
  }

  async get(taskId: string): Promise<TaskRecord | undefined> {
    const held = this.live(taskId);
    return held ? structuredClone(held.record) : undefined;
  }

  async progress(taskId: string, status: 'working' | 'input_required', inputRequests: InputRequests | undefined): Promise<void> {
    const held = this.live(taskId);
    if (!held || TERMINAL_STATUSES.has(held.record.task.status)) return;
    held.record.task = { ...held.record.task, status, lastUpdatedAt: new Date().toISOString() };
    if (inputRequests && status === 'input_required') held.record.inputRequests = structuredClone(inputRequests);
    else delete held.record.inputRequests;
  }

  async finish(taskId: string, end: TaskEnd): Promise<boolean> {
    const held = this.live(taskId);
    if (!held || TERMINAL_STATUSES.has(held.record.task.status)) return false;
    const { statusMessage } = end;
    held.record.task = { ...held.record.task, status: end.status, lastUpdatedAt: new Date().toISOString(), ...(statusMessage === undefined ? {} : { statusMessage }) };
    held.record.result = structuredClone(end.result);
    if (end.error) held.record.error = { ...end.error };
    delete held.record.inputRequests;
    return true;
  }

  async list(owner: string): Promise<TaskRecord[]> {
    this.sweep();
    return [...this.held.values()].filter((held) => held.record.owner === owner).map((held) => structuredClone(held.record));
  }

  async delete(taskId: string): Promise<void> {
    this.held.delete(taskId);
  }

  async close(): Promise<void> {
    this.held.clear();
  }

  private live(taskId: string): Held | undefined {
    const held = this.held.get(taskId);
    if (held && held.expiresAt <= Date.now()) {
      this.held.delete(taskId);
      return undefined;
    }
    return held;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [taskId, held] of this.held) if (held.expiresAt <= now) this.held.delete(taskId);
  }
}
