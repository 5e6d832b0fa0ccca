/**
 * The engine: QuickJS compiled to WebAssembly (quickjs-emscripten, synchronous build), one fresh instance per
 * execution. Code in it sees plain ECMAScript and the three functions code mode gives (call_tool, search_tools,
 * console.log): no process, require, import(), fetch, timers or any other host object exists in there, and it cannot
 * touch this process's objects, only send strings over the bridge.
 *
 * Limits, each enforced by the engine itself:
 * - memory: the instance gets its own WebAssembly.Memory with a hard maximum, so an allocation past it fails inside
 *   QuickJS ("out of memory"). QuickJS's own setMemoryLimit is not enough on its own: under Emscripten it counts
 *   allocations, not bytes (quickjs-emscripten issues #255, #271); it stays on as a bound on any single allocation.
 * - time: an interrupt handler ends the code at the deadline, also inside a loop that never awaits.
 * - stack: QuickJS's stack limit turns deep recursion into a RangeError before the WebAssembly stack runs out.
 * Host calls are promises: the code may run several at once (Promise.all) and awaits them like any other.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { newQuickJSWASMModule, newVariant, RELEASE_SYNC, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime } from 'quickjs-emscripten';

export interface EngineLimits {
  timeoutMs: number;
  memoryMb: number;
  stackKb: number;
  maxLogBytes: number;
}

/** How the engine reaches the host: one string in, one string out (JSON both ways). */
export type Bridge = (op: 'call' | 'search', payload: string) => Promise<string>;

export type EngineOutcome =
  | { ok: true; json: string; logs: string[] }
  | { ok: false; kind: 'timeout' | 'memory' | 'error' | 'crash'; message: string; logs: string[] };

/** WebAssembly's Memory and compile (the project's TypeScript libraries do not declare the WebAssembly namespace). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
const Wasm = (globalThis as unknown as {
  WebAssembly: { Memory: new (descriptor: { initial: number; maximum: number }) => WasmMemory; compile(bytes: Uint8Array): Promise<object> };
}).WebAssembly;

let compiled: Promise<object> | undefined;

/**
 * The engine's WebAssembly, compiled once per thread: each execution instantiates it afresh (its own memory), which
 * costs a fraction of compiling it again.
 */
export function engineModule(): Promise<object> {
  compiled ??= (async () => {
    // The build quickjs-emscripten's RELEASE_SYNC variant loads, resolved from that package.
    const resolve = createRequire(import.meta.resolve('quickjs-emscripten')).resolve;
    return Wasm.compile(await readFile(resolve('@jitl/quickjs-wasmfile-release-sync/wasm')));
  })();
  return compiled;
}

const PAGE = 65_536;
/** The engine needs this much memory to start (the module's own minimum is 16 MB). */
const INITIAL_PAGES = 256;

/**
 * Inside the engine, before the code: the three functions, over two raw host functions that are then deleted from the
 * global object (the closures keep them). Results come back as JSON `{ok, value}` or `{ok: false, error}`; an error
 * becomes an Error with the code and, for a tool's own error result, the result.
 */
const PRELUDE = `(function (host, log, parse, stringify) {
  'use strict';
  const settle = (text) => {
    const answer = parse(text);
    if (answer.ok) return answer.value;
    const error = new Error(answer.error.message);
    error.code = answer.error.code;
    if (answer.error.result !== undefined) error.result = answer.error.result;
    throw error;
  };
  const show = (value) => {
    if (typeof value === 'string') return value;
    if (value instanceof Error) return String(value);
    try { const text = stringify(value); return text === undefined ? String(value) : text; } catch (e) { return String(value); }
  };
  const write = (...values) => { log(values.map(show).join(' ')); };
  globalThis.call_tool = async function call_tool(name, args) {
    if (typeof name !== 'string') throw new TypeError('call_tool(name, arguments): name must be a string');
    return settle(await host('call', stringify({ name, arguments: args === undefined ? {} : args })));
  };
  globalThis.search_tools = async function search_tools(query, options) {
    if (typeof query !== 'string') throw new TypeError('search_tools(query, options): query must be a string');
    return settle(await host('search', stringify({ query, options: options === undefined ? {} : options })));
  };
  globalThis.console = Object.freeze({ log: write, info: write, warn: write, error: write, debug: write });
})(__host, __log, JSON.parse, JSON.stringify);
delete globalThis.__host;
delete globalThis.__log;`;

/** Runs `code` (the body of an async function) and answers with its return value as JSON, or why it did not finish. */
export async function runProgram(code: string, limits: EngineLimits, bridge: Bridge): Promise<EngineOutcome> {
  const memory = new Wasm.Memory({ initial: INITIAL_PAGES, maximum: Math.max(INITIAL_PAGES, Math.floor((limits.memoryMb * 1_048_576) / PAGE)) });
  const module = await newQuickJSWASMModule(newVariant(RELEASE_SYNC, { wasmMemory: memory as never, wasmModule: (await engineModule()) as never }));
  const deadline = Date.now() + limits.timeoutMs;
  const logs = new LogBuffer(limits.maxLogBytes);
  let runtime: QuickJSRuntime | undefined;
  let context: QuickJSContext | undefined;
  let finished = false;
  const outOfMemory = () => memory.buffer.byteLength >= limitBytes(limits);
  try {
    runtime = module.newRuntime();
    runtime.setMemoryLimit(limits.memoryMb * 1_048_576);
    runtime.setMaxStackSize(limits.stackKb * 1_024);
    runtime.setInterruptHandler(() => Date.now() > deadline);
    context = runtime.newContext();
    const ctx = context;
    const rt = runtime;
    const hostFunction = ctx.newFunction('__host', (opHandle, payloadHandle) => {
      const op = ctx.getString(opHandle) as 'call' | 'search';
      const payload = ctx.getString(payloadHandle);
      const deferred = ctx.newPromise();
      bridge(op, payload).then(
        (text) => {
          if (finished) return;
          const value = ctx.newString(text);
          deferred.resolve(value);
          value.dispose();
        },
        (error: unknown) => {
          if (finished) return;
          const value = ctx.newError(error instanceof Error ? error.message : String(error));
          deferred.reject(value);
          value.dispose();
        },
      ).finally(() => {
        if (finished) return;
        // The code continues after the await: its jobs run now (under the same deadline).
        rt.executePendingJobs().dispose();
      });
      return deferred.handle;
    });
    const logFunction = ctx.newFunction('__log', (lineHandle) => {
      logs.add(ctx.getString(lineHandle));
    });
    ctx.setProp(ctx.global, '__host', hostFunction);
    ctx.setProp(ctx.global, '__log', logFunction);
    hostFunction.dispose();
    logFunction.dispose();
    const prelude = ctx.evalCode(PRELUDE, 'prelude.js');
    if (prelude.error) {
      prelude.error.dispose();
      return { ok: false, kind: 'crash', message: 'the sandbox did not start', logs: logs.lines() };
    }
    prelude.value.dispose();

    // The return value is serialised inside the engine, where its cost counts against the code's own limits.
    // JSON.stringify is taken before the code runs: code that replaces it changes its own globals, not this step.
    const program = `((stringify) => (async () => {\n${code}\n})().then((value) => { const text = stringify(value); return text === undefined ? 'null' : text; }))(JSON.stringify)`;
    const started = ctx.evalCode(program, 'execute.js');
    if (started.error) return { ok: false, ...failure(ctx, started.error, outOfMemory()), logs: logs.lines() };
    const promise: QuickJSHandle = started.value;
    const settled = ctx.resolvePromise(promise);
    promise.dispose();
    rt.executePendingJobs().dispose();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), Math.max(0, deadline - Date.now()));
    });
    const result = await Promise.race([settled, timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') return { ok: false, kind: 'timeout', message: `the code did not finish within ${limits.timeoutMs} ms`, logs: logs.lines() };
    if (result.error) return { ok: false, ...failure(ctx, result.error, outOfMemory()), logs: logs.lines() };
    const json = ctx.getString(result.value);
    result.value.dispose();
    return { ok: true, json, logs: logs.lines() };
  } catch (error) {
    // The engine itself gave up (Emscripten abort: typically memory exhausted in the middle of its own work).
    const memoryGone = outOfMemory();
    return {
      ok: false,
      kind: memoryGone ? 'memory' : 'crash',
      message: memoryGone ? `the code used more than ${limits.memoryMb} MB` : `the sandbox failed: ${error instanceof Error ? error.message : String(error)}`,
      logs: logs.lines(),
    };
  } finally {
    finished = true;
    // Freeing the instance is a courtesy: it is dropped whole (its memory with it) either way, and an instance that
    // ran out of memory or was interrupted may not free cleanly.
    try {
      context?.dispose();
      runtime?.dispose();
    } catch {
      // Dropped below.
    }
  }
}

function limitBytes(limits: EngineLimits): number {
  // Within a page of the maximum counts as full: the last allocation that failed needed more than was left.
  return Math.floor((limits.memoryMb * 1_048_576) / PAGE) * PAGE - 4 * PAGE;
}

/** What an error that ended the code says: an interrupt is the deadline, "out of memory" the memory cap. */
function failure(ctx: QuickJSContext, handle: QuickJSHandle, memoryFull: boolean): { kind: 'timeout' | 'memory' | 'error'; message: string } {
  let dumped: unknown;
  try {
    dumped = ctx.dump(handle);
  } catch {
    dumped = undefined;
  } finally {
    handle.dispose();
  }
  const error = (typeof dumped === 'object' && dumped !== null ? dumped : { message: String(dumped) }) as { name?: string; message?: string; stack?: string };
  const message = typeof error.message === 'string' ? error.message : String(dumped);
  if (error.name === 'InternalError' && message === 'interrupted') return { kind: 'timeout', message: 'the code did not finish in time' };
  if (error.name === 'InternalError' && message === 'out of memory') return { kind: 'memory', message: 'the code ran out of memory' };
  if (memoryFull && /memory/i.test(message)) return { kind: 'memory', message: 'the code ran out of memory' };
  const name = typeof error.name === 'string' ? error.name : 'Error';
  const where = typeof error.stack === 'string' ? firstFrame(error.stack) : '';
  return { kind: 'error', message: `${name}: ${message}${where}` };
}

/** `at f (execute.js:3:5)` → ` (line 2)`: the line in the code as sent (the wrapper adds one line above it). */
function firstFrame(stack: string): string {
  const match = /execute\.js:(\d+)(?::\d+)?/.exec(stack);
  return match ? ` (line ${Math.max(1, Number(match[1]) - 1)})` : '';
}

/** Captured console output, bounded in bytes; what does not fit is counted, and the log says so at its end. */
class LogBuffer {
  private readonly kept: string[] = [];
  private bytes = 0;
  private dropped = 0;
  constructor(private readonly limit: number) {}

  add(line: string): void {
    const size = Buffer.byteLength(line) + 1;
    if (this.dropped > 0 || this.bytes + size > this.limit) {
      this.dropped++;
      return;
    }
    this.kept.push(line);
    this.bytes += size;
  }

  lines(): string[] {
    return this.dropped === 0 ? [...this.kept] : [...this.kept, `… ${this.dropped} more line(s) dropped (log limit ${this.limit} bytes)`];
  }
}
