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
 *
 * Calls are bounded here, in the sandbox thread, at the moment the code makes them (awaited or not), before anything
 * crosses to the service: every attempt counts against maxCalls, arguments larger than maxCallBytes (or past
 * maxTotalCallBytes for the execution) or nested deeper than maxDepth are refused, and at most maxPendingCalls are out at once (the rest wait here, up to 8 MB of their
 * arguments). A loop that fires calls without awaiting them therefore costs its own thread, never the
 * service. The return value is measured here too, before it crosses.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { newQuickJSWASMModule, newVariant, RELEASE_SYNC, type QuickJSContext, type QuickJSDeferredPromise, type QuickJSHandle, type QuickJSRuntime } from 'quickjs-emscripten';
import { jsonDepth, truncated } from './json-bounds.js';

export interface EngineLimits {
  timeoutMs: number;
  memoryMb: number;
  stackKb: number;
  maxLogBytes: number;
  /** Call attempts (call_tool and search_tools, awaited or not) per execution. */
  maxCalls: number;
  /** Bytes of JSON arguments of one call. */
  maxCallBytes: number;
  /** Bytes of JSON arguments of all calls of one execution together. */
  maxTotalCallBytes: number;
  /** Calls out to the service at once; later ones wait in the thread. */
  maxPendingCalls: number;
  /** Bytes of the JSON return value. */
  maxOutputBytes: number;
  /** Nesting of call arguments and of the return value. */
  maxDepth: number;
}

/**
 * Arguments of calls waiting for a free slot (maxPendingCalls), in characters: they sit in this thread's own heap
 * (small: see startThread in sandbox.ts), so beyond this a call is refused rather than queued.
 */
const MAX_QUEUED_CHARS = 8 * 1_048_576;

/** An error message kept in full up to this many characters; a longer one is cut (and says so), never emptied. */
export const MAX_MESSAGE_CHARS = 4_096;

/** How the engine reaches the host: one string in, one string out (JSON both ways). */
export type Bridge = (op: 'call' | 'search', payload: string) => Promise<string>;

/** `calls`: call attempts the code made (counted in the thread, refused ones included). */
export type EngineOutcome = (
  | { ok: true; json: string }
  | { ok: false; kind: 'timeout' | 'memory' | 'error' | 'output' | 'calls' | 'crash'; message: string }
) & { logs: string[]; calls?: number };

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
const PRELUDE = `(function (host, log, parse, stringify, reject, then) {
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
  // Plain functions returning promises, not async ones: the host is reached synchronously, so the deadline's (and a
  // flood's) interrupt, which no code can catch, ends the caller's own loop instead of becoming a rejection that a
  // \`.catch(() => {})\` swallows. Mistakes still come back as rejections, as from an async function.
  const request = (op, make) => {
    let payload;
    try { payload = make(); } catch (e) { return reject(e); }
    return then(host(op, payload), settle);
  };
  globalThis.call_tool = function call_tool(name, args) {
    if (typeof name !== 'string') return reject(new TypeError('call_tool(name, arguments): name must be a string'));
    return request('call', () => stringify({ name, arguments: args === undefined ? {} : args }));
  };
  globalThis.search_tools = function search_tools(query, options) {
    if (typeof query !== 'string') return reject(new TypeError('search_tools(query, options): query must be a string'));
    return request('search', () => stringify({ query, options: options === undefined ? {} : options }));
  };
  globalThis.console = Object.freeze({ log: write, info: write, warn: write, error: write, debug: write });
})(__host, __log, JSON.parse, JSON.stringify, Promise.reject.bind(Promise), Function.prototype.call.bind(Promise.prototype.then));
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
  let describe: QuickJSHandle | undefined;
  let finished = false;
  let attempts = 0;
  /** Set when the code goes on calling long past maxCalls: it is then ended (the interrupt handler), not left to spin. */
  let flooded = false;
  let inFlight = 0;
  let queuedBytes = 0;
  /** Bytes of arguments accepted so far (sent or waiting), against maxTotalCallBytes. */
  let acceptedBytes = 0;
  const queue: { op: 'call' | 'search'; payload: string; deferred: QuickJSDeferredPromise }[] = [];
  /** Promises handed to the code and not settled yet: freed with the instance (QuickJS asserts that nothing leaks). */
  const open = new Set<QuickJSDeferredPromise>();
  const outOfMemory = () => memory.buffer.byteLength >= limitBytes(limits);
  const ended = <T extends EngineOutcome>(outcome: T): T => ({ ...outcome, calls: attempts });
  try {
    runtime = module.newRuntime();
    runtime.setMemoryLimit(limits.memoryMb * 1_048_576);
    runtime.setMaxStackSize(limits.stackKb * 1_024);
    runtime.setInterruptHandler(() => flooded || Date.now() > deadline);
    context = runtime.newContext();
    const ctx = context;
    const rt = runtime;
    const settle = (deferred: QuickJSDeferredPromise, text: string) => {
      open.delete(deferred);
      const value = ctx.newString(text);
      deferred.resolve(value);
      value.dispose();
    };
    const send = (op: 'call' | 'search', payload: string, deferred: QuickJSDeferredPromise) => {
      inFlight++;
      bridge(op, payload).then(
        (text) => {
          if (!finished) settle(deferred, text);
        },
        (error: unknown) => {
          if (finished) return;
          open.delete(deferred);
          const value = ctx.newError(error instanceof Error ? error.message : String(error));
          deferred.reject(value);
          value.dispose();
        },
      ).finally(() => {
        inFlight--;
        // Past the deadline the code is over: nothing more crosses, and its jobs would only be interrupted.
        if (finished || Date.now() > deadline) return;
        const next = queue.shift();
        if (next) {
          queuedBytes -= next.payload.length;
          send(next.op, next.payload, next.deferred);
        }
        // The code continues after the await: its jobs run now (under the same deadline).
        rt.executePendingJobs().dispose();
      });
    };
    // Every attempt is counted and measured here, synchronously, as the code makes it: a refused call never leaves the
    // thread, and the code sees the refusal as an exception with its code (awaited or not, it is settled at once).
    const hostFunction = ctx.newFunction('__host', (opHandle, payloadHandle) => {
      attempts++;
      const deferred = ctx.newPromise();
      open.add(deferred);
      if (attempts > limits.maxCalls) {
        // As many refusals again as calls allowed: the code is not handling them (a loop that never awaits), so it ends:
        // the interrupt handler stops it at its next poll, and the throw here (synchronous, so \`.catch()\` on the
        // call does not take it) unwinds the loop now, since a loop of heavy built-ins (a large stringify) polls rarely.
        if (attempts > 2 * limits.maxCalls) {
          flooded = true;
          open.delete(deferred);
          deferred.dispose();
          throw new Error(floodMessage(limits, attempts));
        }
        settle(deferred, refusal('sandbox_calls', `at most ${limits.maxCalls} calls per execution (every call counts, awaited or not)`));
        return deferred.handle;
      }
      const op = ctx.getString(opHandle) === 'search' ? 'search' : 'call';
      // Characters first (no copy): more of them than bytes allowed cannot fit; then the exact UTF-8 size.
      const length = lengthOf(ctx, payloadHandle);
      // Past the execution's total already by its characters (each at least a byte): refused without copying it out.
      if (length <= limits.maxCallBytes && acceptedBytes + length > limits.maxTotalCallBytes) {
        settle(deferred, refusal('payload_too_large', `the calls of one execution may send at most ${limits.maxTotalCallBytes} bytes of arguments in all (${acceptedBytes} sent so far)`));
        return deferred.handle;
      }
      const payload = length > limits.maxCallBytes ? undefined : ctx.getString(payloadHandle);
      const bytes = payload === undefined ? length : Buffer.byteLength(payload);
      if (payload === undefined || bytes > limits.maxCallBytes) {
        settle(deferred, refusal('payload_too_large', `the arguments of one call may be at most ${limits.maxCallBytes} bytes of JSON (these are ${payload === undefined ? `more than ${limits.maxCallBytes}` : bytes})`));
        return deferred.handle;
      }
      if (acceptedBytes + bytes > limits.maxTotalCallBytes) {
        settle(deferred, refusal('payload_too_large', `the calls of one execution may send at most ${limits.maxTotalCallBytes} bytes of arguments in all (${acceptedBytes} sent so far)`));
        return deferred.handle;
      }
      const depth = jsonDepth(payload);
      // The arguments sit one level inside the call's own object.
      if (depth - 1 > limits.maxDepth) {
        settle(deferred, refusal('invalid_arguments', `the arguments of one call may nest at most ${limits.maxDepth} levels deep (these nest ${depth - 1})`));
        return deferred.handle;
      }
      acceptedBytes += bytes;
      if (inFlight < limits.maxPendingCalls) {
        send(op, payload, deferred);
      } else if (queuedBytes + payload.length > MAX_QUEUED_CHARS) {
        settle(deferred, refusal('sandbox_calls', `too many calls waiting (${queue.length}, ${limits.maxPendingCalls} out at once): await some before making more`));
      } else {
        queue.push({ op, payload, deferred });
        queuedBytes += payload.length;
      }
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
      return ended({ ok: false, kind: 'crash', message: 'the sandbox did not start', logs: logs.lines() });
    }
    prelude.value.dispose();
    // What an error that ends the code says, read inside the engine before the code runs (so the code cannot replace
    // what it uses): name, message and stack cut to MAX_MESSAGE_CHARS there, so a 20 MB message is not copied out.
    const describer = ctx.evalCode(DESCRIBE, 'describe.js');
    if (describer.error) {
      describer.error.dispose();
      return ended({ ok: false, kind: 'crash', message: 'the sandbox did not start', logs: logs.lines() });
    }
    describe = describer.value;

    // The return value is serialised inside the engine, where its cost counts against the code's own limits.
    // JSON.stringify is taken before the code runs: code that replaces it changes its own globals, not this step.
    const program = `((stringify) => (async () => {\n${code}\n})().then((value) => { const text = stringify(value); return text === undefined ? 'null' : text; }))(JSON.stringify)`;
    const started = ctx.evalCode(program, 'execute.js');
    if (flooded) {
      if (started.error) started.error.dispose();
      else started.value.dispose();
      return ended({ ok: false, kind: 'calls', message: floodMessage(limits, attempts), logs: logs.lines() });
    }
    if (started.error) return ended({ ok: false, ...failure(ctx, describe, started.error, outOfMemory(), Date.now() > deadline), logs: logs.lines() });
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
    if (flooded) return ended({ ok: false, kind: 'calls', message: floodMessage(limits, attempts), logs: logs.lines() });
    if (result === 'timeout') return ended({ ok: false, kind: 'timeout', message: `the code did not finish within ${limits.timeoutMs} ms`, logs: logs.lines() });
    if (result.error) return ended({ ok: false, ...failure(ctx, describe, result.error, outOfMemory(), Date.now() > deadline), logs: logs.lines() });
    // Measured here, before it crosses to the service: its length without copying it, then its bytes and nesting.
    const length = lengthOf(ctx, result.value);
    const json = length > limits.maxOutputBytes ? undefined : ctx.getString(result.value);
    result.value.dispose();
    const bytes = json === undefined ? length : Buffer.byteLength(json);
    if (json === undefined || bytes > limits.maxOutputBytes) {
      const size = json === undefined ? `more than ${limits.maxOutputBytes}` : String(bytes);
      return ended({ ok: false, kind: 'output', message: `the return value is ${size} bytes of JSON; at most ${limits.maxOutputBytes} are allowed (return less, or a summary)`, logs: logs.lines() });
    }
    const depth = jsonDepth(json);
    if (depth > limits.maxDepth) {
      return ended({ ok: false, kind: 'output', message: `the return value nests ${depth} levels deep; at most ${limits.maxDepth} are allowed (return a flatter value)`, logs: logs.lines() });
    }
    return ended({ ok: true, json, logs: logs.lines() });
  } catch (error) {
    // The engine itself gave up (Emscripten abort: typically memory exhausted in the middle of its own work).
    const memoryGone = outOfMemory();
    return ended({
      ok: false,
      kind: memoryGone ? 'memory' : 'crash',
      message: memoryGone ? `the code used more than ${limits.memoryMb} MB` : `the sandbox failed: ${truncated(error instanceof Error ? error.message : String(error), MAX_MESSAGE_CHARS)}`,
      logs: logs.lines(),
    });
  } finally {
    finished = true;
    queue.length = 0;
    // Freeing the instance is a courtesy: it is dropped whole (its memory with it) either way, and an instance that
    // ran out of memory or was interrupted may not free cleanly.
    try {
      for (const deferred of open) deferred.dispose();
      describe?.dispose();
      context?.dispose();
      runtime?.dispose();
    } catch {
      // Dropped below.
    }
  }
}

function limitBytes(limits: EngineLimits): number {
  // Within 1 MB of the maximum counts as full: the allocation that failed needed more than was left (measured: the
  // engine gives up some 9 pages short of the cap).
  return Math.floor((limits.memoryMb * 1_048_576) / PAGE) * PAGE - 16 * PAGE;
}

function floodMessage(limits: EngineLimits, attempts: number): string {
  return `the code kept calling past its limit of ${limits.maxCalls} calls (${attempts} attempts, awaited or not) and was ended`;
}

/** A string's length in the engine, read without copying the string out. */
function lengthOf(ctx: QuickJSContext, handle: QuickJSHandle): number {
  const length = ctx.getProp(handle, 'length');
  try {
    return ctx.getNumber(length);
  } finally {
    length.dispose();
  }
}

/** A refused call as the code's call_tool reads it (the same shape as the service's answers). */
function refusal(code: string, message: string): string {
  return JSON.stringify({ ok: false, error: { code, message } });
}

/**
 * Inside the engine: a thrown value → JSON `{kind, name?, message, stack?}` with every string cut to MAX_MESSAGE_CHARS
 * (a getter or toString that throws gives `unreadable`); null when even that fails (the engine has no memory left).
 */
const DESCRIBE = `((stringify, isArray) => (thrown) => {
  'use strict';
  const cut = (text) => text.length > ${MAX_MESSAGE_CHARS} ? text.slice(0, ${MAX_MESSAGE_CHARS}) + '… (' + text.length + ' characters, cut)' : text;
  const read = (value) => { try { return typeof value === 'string' ? cut(value) : cut(String(value)); } catch (e) { return 'unreadable'; } };
  try {
    if (thrown !== null && typeof thrown === 'object' && !isArray(thrown)) {
      let name, message, stack;
      try { name = thrown.name; } catch (e) { name = undefined; }
      try { message = thrown.message; } catch (e) { message = undefined; }
      try { stack = thrown.stack; } catch (e) { stack = undefined; }
      return stringify({ kind: 'error', name: typeof name === 'string' ? cut(name) : undefined, message: message === undefined ? read(thrown) : read(message), stack: typeof stack === 'string' ? cut(stack) : undefined });
    }
    return stringify({ kind: 'value', message: thrown === undefined ? 'undefined' : read(typeof thrown === 'string' ? thrown : stringify(thrown) ?? thrown) });
  } catch (e) {
    return null;
  }
})(JSON.stringify, Array.isArray)`;

/** A thrown value as DESCRIBE reads it. */
interface Described {
  kind: 'error' | 'value';
  name?: string;
  message: string;
  stack?: string;
}

/**
 * What an error that ended the code says: an interrupt is the deadline, "out of memory" (or a thrown value that cannot
 * even be described while the engine's memory is exhausted) the memory cap. Never an empty message.
 */
function failure(ctx: QuickJSContext, describe: QuickJSHandle, handle: QuickJSHandle, memoryFull: boolean, pastDeadline: boolean): { kind: 'timeout' | 'memory' | 'error'; message: string } {
  let described: Described | undefined;
  try {
    const answer = ctx.callFunction(describe, ctx.undefined, handle);
    if (answer.error) {
      answer.error.dispose();
    } else {
      const text = ctx.typeof(answer.value) === 'string' ? ctx.getString(answer.value) : undefined;
      answer.value.dispose();
      if (text !== undefined) described = JSON.parse(text) as Described;
    }
  } catch {
    described = undefined;
  } finally {
    handle.dispose();
  }
  const memory = { kind: 'memory' as const, message: 'the code ran out of memory' };
  const { name, message, stack } = described ?? { name: undefined, message: undefined, stack: undefined };
  if (name === 'InternalError' && message === 'interrupted') return { kind: 'timeout', message: 'the code did not finish in time' };
  if (name === 'InternalError' && message !== undefined && /^out of memory/.test(message)) return memory;
  // The engine rejects with null (or a value that cannot be read) where it could not build the error: no memory left
  // to make "out of memory". With the memory at its cap, that is the cause, not "null".
  const unreadable = !described || (described.kind === 'value' && (message === 'null' || message === 'undefined'));
  if (memoryFull && (unreadable || (message !== undefined && /memory/i.test(message)))) return memory;
  // Past the deadline, whatever came out as the interrupt unwound the code (null, or a TypeError from a half-built
  // value) is the deadline's doing.
  if (pastDeadline) return { kind: 'timeout', message: 'the code did not finish in time' };
  if (!described || message === undefined) return { kind: 'error', message: 'the code threw a value that cannot be read (the engine may be out of memory)' };
  if (described.kind === 'value') return { kind: 'error', message: `the code threw ${message === '' ? 'an empty string' : `a non-Error value: ${message}`}` };
  const where = typeof stack === 'string' ? firstFrame(stack) : '';
  return { kind: 'error', message: `${name ?? 'Error'}: ${message === '' ? '(no message)' : message}${where}` };
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
