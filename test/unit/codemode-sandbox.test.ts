/**
 * The sandbox on its own (src/codemode/sandbox.ts, quickjs.ts, thread.ts): what code can do, what it cannot reach,
 * and how each limit ends an execution. The ToolHost here is a small in-test host (code mode's seam); the MCP side,
 * with real upstreams, is test/integration/mcp-codemode.test.ts.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ToolCallFailure, type ToolHost } from '../../src/codemode/host.js';
import { Sandbox, type Execution } from '../../src/codemode/sandbox.js';
import { sandboxSettingsSchema } from '../../src/codemode/settings.js';

/** Records what the code asked for; `fail` answers with a tool error, `slow` waits. */
function recordingHost() {
  const calls: { name: string; args: Record<string, unknown> }[] = [];
  const host: ToolHost = {
    async call(name, args) {
      calls.push({ name, args });
      if (name === 'fail') throw new ToolCallFailure('upstream says no', 'tool_error', { reason: 'no' });
      if (name === 'slow') await new Promise((resolve) => setTimeout(resolve, Number(args.ms ?? 50)));
      return { name, args };
    },
    async search(query, options) {
      return [{ name: `found:${query}`, detail: options.detail ?? 'code' }];
    },
  };
  return { host, calls };
}

function failedWith(execution: Execution, code: string): void {
  assert.equal(execution.ok, false, `expected ${code}, got ${JSON.stringify(execution)}`);
  if (!execution.ok) assert.equal(execution.error.code, code, execution.error.message);
}

const sandbox = new Sandbox(sandboxSettingsSchema.parse({ timeoutMs: 2_000, maxCalls: 5, maxOutputBytes: 2_048, maxLogBytes: 200, maxConcurrentPerKey: 1, idleThreads: 2 }));
after(() => sandbox.close());

describe('code mode sandbox: what code can do', () => {
  it('awaits host calls, several at once, and returns the combination as JSON with the captured log', async () => {
    const { host, calls } = recordingHost();
    const execution = await sandbox.run(
      `const [a, b] = await Promise.all([call_tool('one', {n: 1}), call_tool('two', {n: 2})]);
       console.log('got', a.name, {n: b.args.n});
       return {sum: a.args.n + b.args.n, names: [a.name, b.name]};`,
      host,
      { owner: 'a' },
    );
    assert.ok(execution.ok, JSON.stringify(execution));
    assert.deepEqual(execution.value, { sum: 3, names: ['one', 'two'] });
    assert.deepEqual(execution.logs, ['got one {"n":2}']);
    assert.equal(execution.calls, 2);
    assert.deepEqual(calls.map((call) => call.name).sort(), ['one', 'two']);
  });

  it('turns a tool error into an exception the code can catch, with its code and result', async () => {
    const { host } = recordingHost();
    const execution = await sandbox.run(`try { await call_tool('fail'); return 'not reached'; } catch (e) { return [e.message, e.code, e.result]; }`, host, { owner: 'a' });
    assert.ok(execution.ok, JSON.stringify(execution));
    assert.deepEqual(execution.value, ['upstream says no', 'tool_error', { reason: 'no' }]);
  });

  it('an uncaught error ends the execution with the error and the line it was thrown at', async () => {
    const { host } = recordingHost();
    const execution = await sandbox.run(`const x = 1;\nthrow new TypeError('bad input ' + x);`, host, { owner: 'a' });
    failedWith(execution, 'sandbox_error');
    if (!execution.ok) assert.match(execution.error.message, /TypeError: bad input 1 \(line 2\)/);
  });

  it('searches through the host, signatures by default', async () => {
    const { host } = recordingHost();
    const execution = await sandbox.run(`return await search_tools('send mail', {top_k: 2});`, host, { owner: 'a' });
    assert.ok(execution.ok);
    assert.deepEqual(execution.value, [{ name: 'found:send mail', detail: 'code' }]);
  });

  it('returns null for undefined and bounds the log', async () => {
    const { host } = recordingHost();
    const execution = await sandbox.run(`for (let i = 0; i < 100; i++) console.log('line ' + i);`, host, { owner: 'a' });
    assert.ok(execution.ok);
    assert.equal(execution.value, null);
    assert.ok(execution.logs.length < 40, `${execution.logs.length} lines kept`);
    assert.match(execution.logs.at(-1)!, /more line\(s\) dropped/);
  });
});

describe('code mode sandbox: limits', () => {
  it('ends an endless loop at the deadline, and the event loop stays free meanwhile', async () => {
    const { host } = recordingHost();
    const started = Date.now();
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 50);
    const execution = await sandbox.run('while (true) {}', host, { owner: 'a' });
    clearInterval(ticker);
    failedWith(execution, 'sandbox_timeout');
    assert.ok(Date.now() - started < 5_000, 'ended near the 2 s deadline');
    // The loop ran on a sandbox thread: this thread's timers kept firing.
    assert.ok(ticks >= 10, `${ticks} ticks of a 50 ms timer during a 2 s loop`);
  });

  it('ends a memory bomb at the memory cap', async () => {
    const { host } = recordingHost();
    const execution = await sandbox.run(`const keep = []; while (true) keep.push('x'.repeat(100000) + keep.length);`, host, { owner: 'a' });
    failedWith(execution, 'sandbox_memory');
  });

  it('turns deep recursion into a RangeError the code can catch', async () => {
    const { host } = recordingHost();
    const execution = await sandbox.run(`function down(n) { return down(n + 1) + 1; } try { down(0); } catch (e) { return e.name + ': ' + e.message; }`, host, { owner: 'a' });
    assert.ok(execution.ok, JSON.stringify(execution));
    assert.match(String(execution.value), /stack overflow|call stack/i);
  });

  it('allows at most maxCalls calls', async () => {
    const { host, calls } = recordingHost();
    const execution = await sandbox.run(`const seen = []; for (let i = 0; i < 8; i++) { try { await call_tool('t' + i); seen.push('ok'); } catch (e) { seen.push(e.code); } } return seen;`, host, { owner: 'a' });
    assert.ok(execution.ok);
    assert.deepEqual(execution.value, ['ok', 'ok', 'ok', 'ok', 'ok', 'sandbox_calls', 'sandbox_calls', 'sandbox_calls']);
    assert.equal(calls.length, 5);
  });

  it('refuses a return value larger than maxOutputBytes, and code longer than maxCodeBytes', async () => {
    const { host } = recordingHost();
    failedWith(await sandbox.run(`return 'y'.repeat(5000);`, host, { owner: 'a' }), 'sandbox_output');
    failedWith(await sandbox.run(`return 1; //${'z'.repeat(70_000)}`, host, { owner: 'a' }), 'payload_too_large');
  });

  it('runs at most maxConcurrentPerKey executions per key at once; other keys are not held up', async () => {
    const { host } = recordingHost();
    const long = sandbox.run(`await call_tool('slow', {ms: 400}); return 'first';`, host, { owner: 'k1' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = await sandbox.run(`return 'second';`, host, { owner: 'k1' });
    failedWith(second, 'busy');
    const other = await sandbox.run(`return 'other key';`, host, { owner: 'k2' });
    assert.ok(other.ok);
    const first = await long;
    assert.ok(first.ok);
    assert.equal(first.value, 'first');
    const again = await sandbox.run(`return 'after';`, host, { owner: 'k1' });
    assert.ok(again.ok, 'the slot is free again once the first ended');
  });

  it('a cancelled execution ends at once', async () => {
    const { host } = recordingHost();
    const controller = new AbortController();
    const running = sandbox.run('while (true) {}', host, { owner: 'c', signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    const execution = await running;
    failedWith(execution, 'sandbox_error');
    assert.ok(Date.now() - started < 1_500);
  });
});

describe('code mode sandbox: nothing of the host is reachable', () => {
  const escapes: [string, string][] = [
    ['process', `return typeof process`],
    ['require', `return typeof require`],
    ['fetch', `return typeof fetch`],
    ['timers', `return [typeof setTimeout, typeof setInterval, typeof queueMicrotask === 'function' ? 'fn' : 'undefined'].join()`],
    ['the raw bridge', `return [typeof __host, typeof __log, typeof globalThis.__host].join()`],
    ['the Function constructor', `return (function () {}).constructor('return typeof process')()`],
    ['eval', `return eval('typeof process + typeof require')`],
    ['globalThis', `return Object.getOwnPropertyNames(globalThis).filter((name) => /^(process|require|fetch|Buffer|module|exports|importScripts|setTimeout|WebAssembly|Worker|XMLHttpRequest|navigator)$/.test(name))`],
  ];
  for (const [what, code] of escapes) {
    it(`no ${what}`, async () => {
      const { host } = recordingHost();
      const execution = await sandbox.run(code, host, { owner: 'e' });
      assert.ok(execution.ok, JSON.stringify(execution));
      const value = execution.value;
      if (Array.isArray(value)) assert.deepEqual(value, []);
      else assert.match(String(value), /^(undefined,?)+$|^undefinedundefined$/, `${what}: ${String(value)}`);
    });
  }

  it('import() of a host module fails', async () => {
    const { host } = recordingHost();
    const execution = await sandbox.run(`const fs = await import('node:fs'); return typeof fs.readFileSync;`, host, { owner: 'e' });
    failedWith(execution, 'sandbox_error');
  });

  it('prototype pollution stays inside the execution', async () => {
    const { host, calls } = recordingHost();
    const execution = await sandbox.run(
      `Object.prototype.polluted = 'yes'; Array.prototype.map = null; JSON.parse = () => ({hacked: true});
       await call_tool('probe', JSON.parse('{"__proto__": {"isAdmin": true}}'));
       return JSON.parse('{"__proto__": {"isAdmin": true}, "a": 1}');`,
      host,
      { owner: 'e' },
    );
    assert.ok(execution.ok, JSON.stringify(execution));
    assert.equal(({} as Record<string, unknown>).polluted, undefined, 'this process\'s Object.prototype is untouched');
    assert.equal(({} as Record<string, unknown>).isAdmin, undefined);
    assert.equal(typeof [].map, 'function');
    assert.equal((calls[0]!.args as Record<string, unknown>).isAdmin, undefined, 'arguments arrive as plain JSON data');
    // The next execution starts from a fresh engine: nothing of the last one is left.
    const next = await sandbox.run(`return [({}).polluted === undefined, typeof [].map];`, host, { owner: 'e' });
    assert.ok(next.ok);
    assert.deepEqual(next.value, [true, 'function']);
  });
});
