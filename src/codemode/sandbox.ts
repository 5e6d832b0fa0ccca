/**
 * Runs model-written code (code mode): each execution in a fresh QuickJS instance (quickjs.ts) on a sandbox thread
 * (thread.ts), its host calls answered here by a ToolHost, under the limits of SandboxSettings. The service's event
 * loop never runs the code: a loop in it costs a thread's time, not the service's.
 *
 * Three lines of defence against code that will not stop: the engine's interrupt handler (at the deadline), this
 * side's timer (the deadline plus a grace period: the thread is terminated), and the per-key and global bounds on
 * executions at once.
 */
import { AsyncResource } from 'node:async_hooks';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ToolrouterError } from '../errors.js';
import { ToolCallFailure, type SearchOptions, type ToolHost } from './host.js';
import { jsonDepth } from './json-bounds.js';
import type { EngineLimits, EngineOutcome } from './quickjs.js';
import type { SandboxSettings } from './settings.js';
import type { ThreadReply, ThreadRequest } from './thread-messages.js';

export type SandboxOptions = SandboxSettings;

export interface RunOptions {
  /** Whose execution this is (a key id; one name for every open caller): executions at once are bounded per owner. */
  owner: string;
  /** The caller gave up (MCP cancellation): the execution is ended. */
  signal?: AbortSignal;
}

/** What one execution came to: the return value (parsed JSON) or the error that ended it, and what it did on the way. */
export type Execution = ({ ok: true; value: unknown } | { ok: false; error: ToolrouterError }) & {
  /** console output, bounded by maxLogBytes. */
  logs: string[];
  /** call_tool and search_tools calls made. */
  calls: number;
  ms: number;
};

/** How long past the deadline the thread may take to report before it is terminated. */
const GRACE_MS = 1_000;

/** How long one call from code holds its share of maxCallBytesInFlight at most (see CallGate). */
const HOLD_MS = 1_000;

export class Sandbox {
  private readonly idle: SandboxThread[] = [];
  /** Host calls of every execution pass here, within maxCallBytesInFlight, one started per turn of the event loop. */
  private readonly gate: CallGate;
  private readonly running = new Map<string, number>();
  private total = 0;
  private nextRun = 0;
  private closed = false;

  constructor(readonly settings: SandboxOptions) {
    this.gate = new CallGate(settings.maxCallBytesInFlight);
  }

  /** Runs `code`, the body of an async function; never throws for anything the code does. */
  async run(code: string, host: ToolHost, options: RunOptions): Promise<Execution> {
    const started = performance.now();
    const done = (result: { ok: true; value: unknown } | { ok: false; error: ToolrouterError }, logs: string[] = [], calls = 0): Execution => ({
      ...result,
      logs,
      calls,
      ms: Math.round(performance.now() - started),
    });
    if (this.closed) return done({ ok: false, error: new ToolrouterError('upstream_unavailable', 'the sandbox is shut down') });
    const bytes = Buffer.byteLength(code);
    if (bytes > this.settings.maxCodeBytes) {
      return done({ ok: false, error: new ToolrouterError('payload_too_large', `code is ${bytes} bytes; at most ${this.settings.maxCodeBytes} are accepted`) });
    }
    const mine = this.running.get(options.owner) ?? 0;
    if (mine >= this.settings.maxConcurrentPerKey || this.total >= this.settings.maxConcurrent) {
      const which = mine >= this.settings.maxConcurrentPerKey ? `${this.settings.maxConcurrentPerKey} per key` : `${this.settings.maxConcurrent} in all`;
      return done({ ok: false, error: new ToolrouterError('busy', `too many code executions at once (at most ${which}); try again when one has finished`, { retryAfterSeconds: 1 }) });
    }
    this.running.set(options.owner, mine + 1);
    this.total++;
    let calls = 0;
    /** Set when the execution is over: its calls still waiting at the gate are dropped, not sent to the service. */
    let over = false;
    try {
      // Host calls run in the caller's async context (its trace span, its request), not the thread's message handler's.
      const call = AsyncResource.bind((name: string, args: Record<string, unknown>) => host.call(name, args));
      const search = AsyncResource.bind((query: string, searchOptions: SearchOptions) => host.search(query, searchOptions));
      // The sandbox thread counts and measures every call before it crosses (quickjs.ts); this is the second line.
      const answer = async (op: 'call' | 'search', payload: string): Promise<string> => {
        calls++;
        if (calls > this.settings.maxCalls) {
          return failed('sandbox_calls', `at most ${this.settings.maxCalls} calls per execution`);
        }
        const bytes = Buffer.byteLength(payload);
        if (bytes > this.settings.maxCallBytes) {
          return failed('payload_too_large', `the arguments of one call may be at most ${this.settings.maxCallBytes} bytes`);
        }
        const release = await this.gate.enter(bytes);
        // A call waiting on a slow upstream gives its share back after HOLD_MS: the budget spreads out the service's own
        // work on large calls, and one slow server must not hold up other callers' code.
        const held = setTimeout(release, HOLD_MS);
        try {
          if (over) return failed('sandbox_calls', 'the execution is over');
          const request = JSON.parse(payload) as { name?: string; arguments?: unknown; query?: string; options?: unknown };
          const value =
            op === 'call'
              ? await call(String(request.name), isRecord(request.arguments) ? request.arguments : {})
              : await search(String(request.query), isRecord(request.options) ? (request.options as SearchOptions) : {});
          return JSON.stringify({ ok: true, value: value ?? null });
        } catch (error) {
          if (error instanceof ToolCallFailure) return JSON.stringify({ ok: false, error: { message: error.message, code: error.code, ...(error.result === undefined ? {} : { result: error.result }) } });
          if (error instanceof ToolrouterError) return failed(error.code, error.message);
          return failed('internal', 'the call failed inside toolrouter');
        } finally {
          clearTimeout(held);
          release();
        }
      };
      const limits: EngineLimits = {
        timeoutMs: this.settings.timeoutMs,
        memoryMb: this.settings.memoryMb,
        stackKb: this.settings.stackKb,
        maxLogBytes: this.settings.maxLogBytes,
        maxCalls: this.settings.maxCalls,
        maxCallBytes: this.settings.maxCallBytes,
        maxTotalCallBytes: this.settings.maxTotalCallBytes,
        maxPendingCalls: this.settings.maxPendingCalls,
        maxOutputBytes: this.settings.maxOutputBytes,
        maxDepth: this.settings.maxDepth,
      };
      let thread = this.idle.pop();
      // An idle thread can have died (a resource limit, a crash): it is dropped for a new one.
      while (thread && !thread.alive) thread = this.idle.pop();
      thread ??= new SandboxThread();
      const outcome = await thread.execute(this.nextRun++, code, limits, answer, this.settings.timeoutMs + GRACE_MS, options.signal);
      if (thread.alive && !this.closed && this.idle.length < this.settings.idleThreads) this.idle.push(thread);
      else void thread.stop();
      // Attempts as the thread counted them (refused ones included); the crossings counted here if the thread could not say.
      return done(this.result(outcome), outcome.logs, outcome.calls ?? calls);
    } finally {
      over = true;
      const left = (this.running.get(options.owner) ?? 1) - 1;
      if (left === 0) this.running.delete(options.owner);
      else this.running.set(options.owner, left);
      this.total--;
    }
  }

  /**
   * Starts the idle threads now (each loads and compiles the engine), so the first executions do not wait for a thread
   * to start. Without it threads start on demand.
   */
  warm(): void {
    while (!this.closed && this.idle.length < this.settings.idleThreads) this.idle.push(new SandboxThread());
  }

  /** Executions running now (all owners). */
  get active(): number {
    return this.total;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.idle.splice(0).map((thread) => thread.stop()));
  }

  private result(outcome: EngineOutcome): { ok: true; value: unknown } | { ok: false; error: ToolrouterError } {
    if (!outcome.ok) {
      const code = { timeout: 'sandbox_timeout', memory: 'sandbox_memory', error: 'sandbox_error', output: 'sandbox_output', calls: 'sandbox_calls', crash: 'internal' }[outcome.kind];
      return { ok: false, error: new ToolrouterError(code, outcome.message) };
    }
    const bytes = Buffer.byteLength(outcome.json);
    if (bytes > this.settings.maxOutputBytes) {
      return { ok: false, error: new ToolrouterError('sandbox_output', `the return value is ${bytes} bytes of JSON; at most ${this.settings.maxOutputBytes} are allowed (return less, or a summary)`) };
    }
    // Depth was bounded in the thread; checked again since JSON.parse, zod and the SDK recurse on this thread.
    const depth = jsonDepth(outcome.json);
    if (depth > this.settings.maxDepth) return { ok: false, error: new ToolrouterError('sandbox_output', `the return value nests ${depth} levels deep; at most ${this.settings.maxDepth} are allowed (return a flatter value)`) };
    return { ok: true, value: JSON.parse(outcome.json) as unknown };
  }
}

function failed(code: string, message: string): string {
  return JSON.stringify({ ok: false, error: { code, message } });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Admits host calls from every sandbox thread to the service: at most `budget` bytes of arguments at once (a call larger
 * than the budget goes alone), in arrival order, and each started on its own turn of the event loop. Without it, calls
 * arriving together from several threads are parsed, validated and written upstream back to back in one task: four
 * executions sending 900 KB calls held the event loop for up to half a second at a time on a loaded 2-core machine.
 * A call holds its share until it is answered or for HOLD_MS, whichever comes first.
 */
class CallGate {
  private used = 0;
  private readonly waiting: { bytes: number; go: () => void }[] = [];
  private scheduled = false;

  constructor(private readonly budget: number) {}

  /** Resolves when the call may start, with the function that gives its share back (once; later calls do nothing). */
  enter(bytes: number): Promise<() => void> {
    return new Promise<() => void>((start) => {
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        this.used -= bytes;
        this.pump();
      };
      this.waiting.push({ bytes, go: () => start(release) });
      this.pump();
    });
  }

  private fits(): boolean {
    const next = this.waiting[0];
    return next !== undefined && (this.used === 0 || this.used + next.bytes <= this.budget);
  }

  /** Starts the next waiting call on the next turn (setImmediate: after pending I/O such as /health is served). */
  private pump(): void {
    if (this.scheduled || !this.fits()) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.fits()) return;
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.go();
      this.pump();
    });
  }
}

/** One sandbox thread, running one execution at a time. */
class SandboxThread {
  private readonly worker: Worker;
  private current: { run: number; answer: (op: 'call' | 'search', payload: string) => Promise<string>; finish: (outcome: EngineOutcome) => void } | undefined;
  alive = true;

  constructor() {
    this.worker = startThread(threadFile());
    this.worker.on('message', (message: ThreadReply) => {
      const current = this.current;
      if (!current || message.run !== current.run) return;
      if (message.type === 'done') {
        current.finish(message.outcome);
        return;
      }
      void current.answer(message.op, message.payload).then((text) => {
        if (this.alive) this.worker.postMessage({ type: 'answer', call: message.call, text } satisfies ThreadRequest);
      });
    });
    const lost = (why: string) => {
      this.alive = false;
      this.current?.finish({ ok: false, kind: 'crash', message: `the sandbox thread ${why}`, logs: [] });
    };
    this.worker.on('error', (error: unknown) => lost(`failed: ${error instanceof Error ? error.message : String(error)}`));
    this.worker.on('exit', (code) => lost(`exited (code ${code})`));
    // An idle thread does not keep the process alive.
    this.worker.unref();
  }

  execute(
    run: number,
    code: string,
    limits: EngineLimits,
    answer: (op: 'call' | 'search', payload: string) => Promise<string>,
    hardLimitMs: number,
    signal?: AbortSignal,
  ): Promise<EngineOutcome> {
    return new Promise<EngineOutcome>((resolve) => {
      const finish = (outcome: EngineOutcome) => {
        if (this.current?.run !== run) return;
        this.current = undefined;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      // The last resort: the engine's own deadline should have ended the code already.
      const end = (kind: 'timeout' | 'error', message: string) => {
        finish({ ok: false, kind, message, logs: [] });
        void this.stop();
      };
      const onAbort = () => end('error', 'the execution was cancelled');
      this.current = { run, answer, finish };
      const timer = setTimeout(() => end('timeout', `the code did not finish within ${limits.timeoutMs} ms`), hardLimitMs);
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.worker.postMessage({ type: 'run', run, code, limits } satisfies ThreadRequest);
    });
  }

  async stop(): Promise<void> {
    this.alive = false;
    await this.worker.terminate();
  }
}

/** The thread's module, next to this one: `.js` from the compiled dist/, `.ts` under tsx (tests, `npm run dev`). */
function threadFile(): URL {
  const extension = path.extname(fileURLToPath(import.meta.url));
  return new URL(`./thread${extension}`, import.meta.url);
}

/**
 * Compiled JavaScript loads directly. TypeScript needs tsx registered inside the thread (on Node 20 the loader hooks
 * of `--import tsx` do not reach worker threads), as src/indexing/worker-builder.ts does. The thread's own JavaScript
 * heap is small (the engine's memory is WebAssembly memory, bounded by the engine).
 */
function startThread(file: URL): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: 128, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 };
  if (!file.pathname.endsWith('.ts')) return new Worker(file, { resourceLimits });
  const tsx = import.meta.resolve('tsx/esm/api');
  const bootstrap = `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(file.href)}); });`;
  return new Worker(bootstrap, { eval: true, resourceLimits });
}
