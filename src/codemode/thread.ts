/**
 * A sandbox thread (worker_threads): runs executions one at a time in fresh QuickJS instances (quickjs.ts) and
 * relays their host calls to the main thread, which answers them (sandbox.ts). Code runs here rather than on the main
 * thread so that a loop that never awaits cannot hold up the service's event loop: the main thread keeps serving
 * (/health, other requests) and ends the thread outright if the engine's own deadline ever failed.
 */
import { getPriority, setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { engineModule, runProgram, type EngineLimits } from './quickjs.js';
import type { ThreadReply, ThreadRequest } from './thread-messages.js';

/** How much nicer (lower in CPU priority) than the service the sandbox threads run; 19 is the lowest priority. */
const NICER_BY = 10;

const port = parentPort;
if (!port) throw new Error('src/codemode/thread.ts runs as a worker thread');

// Model code runs at a lower CPU priority than the service: on Linux a thread's nice value is its own, so four threads
// spinning in loops take the cores the main thread leaves idle, not the time it needs to answer (/health, other
// callers). Measured on 2 cores: four flooding executions at nice 0 held the main thread off its cores for up to 2.3 s
// while it used 0.85 s of CPU in 12 s. Lowering one's own priority needs no privilege; where it fails, nothing changes.
try {
  setPriority(Math.min(19, getPriority() + NICER_BY));
} catch {
  // Not permitted here (some containers): the thread runs at the service's priority.
}

// Compiled at start, so a warm thread's first execution only instantiates it.
void engineModule();

const waiting = new Map<number, { resolve: (text: string) => void; reject: (error: Error) => void }>();
let nextCall = 0;

port.on('message', (message: ThreadRequest) => {
  if (message.type === 'answer') {
    const pending = waiting.get(message.call);
    waiting.delete(message.call);
    if (!pending) return;
    if (message.error !== undefined) pending.reject(new Error(message.error));
    else pending.resolve(message.text ?? '');
    return;
  }
  void run(message.run, message.code, message.limits);
});

async function run(id: number, code: string, limits: EngineLimits): Promise<void> {
  const outcome = await runProgram(code, limits, (op, payload) => {
    const call = nextCall++;
    return new Promise<string>((resolve, reject) => {
      waiting.set(call, { resolve, reject });
      port!.postMessage({ type: 'host', run: id, call, op, payload } satisfies ThreadReply);
    });
  });
  // Calls still unanswered belong to an execution that is over: their answers are dropped.
  waiting.clear();
  port!.postMessage({ type: 'done', run: id, outcome } satisfies ThreadReply);
}
