/**
 * Code mode under hostile code (issue 50, items 1 and 6): call floods are counted and cut off in the sandbox thread,
 * pending calls are bounded, and results and errors are bounded in depth and size with sandbox_* codes and messages
 * that name the cause (never "Error: null", never empty). The ToolHost is a small in-test host that records what
 * reached it: what it never sees never left the sandbox thread.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ToolHost } from '../../src/codemode/host.js';
import { jsonDepth } from '../../src/codemode/json-bounds.js';
import { Sandbox, type Execution } from '../../src/codemode/sandbox.js';
import { sandboxSettingsSchema } from '../../src/codemode/settings.js';

function countingHost(delayMs = 0) {
  const seen = { calls: 0, bytes: 0, inFlight: 0, maxInFlight: 0 };
  const host: ToolHost = {
    async call(_name, args) {
      seen.calls++;
      seen.bytes += JSON.stringify(args).length;
      seen.inFlight++;
      seen.maxInFlight = Math.max(seen.maxInFlight, seen.inFlight);
      try {
        if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
        return { ok: true };
      } finally {
        seen.inFlight--;
      }
    },
    async search() {
      return [];
    },
  };
  return { host, seen };
}

function failedWith(execution: Execution, code: string, message?: RegExp): void {
  assert.equal(execution.ok, false, `expected ${code}, got ${JSON.stringify(execution).slice(0, 300)}`);
  if (execution.ok) return;
  assert.equal(execution.error.code, code, execution.error.message.slice(0, 300));
  assert.notEqual(execution.error.message.trim(), '', 'a message, never an empty one');
  assert.doesNotMatch(execution.error.message, /^(Error: )?null$/);
  if (message) assert.match(execution.error.message, message);
}

const sandbox = new Sandbox(sandboxSettingsSchema.parse({ timeoutMs: 8_000, maxCalls: 20, maxPendingCalls: 4, maxCallBytes: 4_096, maxDepth: 32, idleThreads: 1 }));
after(() => sandbox.close());

describe('code mode: call floods end in the sandbox thread', () => {
  it('un-awaited calls in a loop that never ends: at most maxCalls reach the host, and the code is ended with sandbox_calls', async () => {
    const { host, seen } = countingHost(20);
    const started = performance.now();
    const execution = await sandbox.run(`for (;;) { call_tool('send', {to: 'p'.repeat(1000)}).catch(() => {}); }`, host, { owner: 'a' });
    failedWith(execution, 'sandbox_calls', /past its limit of 20 calls/);
    assert.ok(seen.calls <= 20, `${seen.calls} calls reached the host`);
    assert.ok(execution.calls > 20, 'every attempt is counted, awaited or not');
    assert.ok(performance.now() - started < 6_000, 'ended long before the deadline');
  });

  it('arguments over maxCallBytes or deeper than maxDepth are refused before they cross; the code can catch it', async () => {
    const { host, seen } = countingHost();
    const execution = await sandbox.run(
      `const out = [];
       try { await call_tool('big', {to: 'p'.repeat(900000)}); } catch (e) { out.push(e.code); }
       let deep = 0; for (let i = 0; i < 40; i++) deep = {deep};
       try { await call_tool('deep', deep); } catch (e) { out.push(e.code + ': ' + e.message); }
       return out;`,
      host,
      { owner: 'a' },
    );
    assert.ok(execution.ok, JSON.stringify(execution).slice(0, 300));
    assert.equal(seen.calls, 0, 'nothing reached the host');
    const [big, deep] = execution.value as string[];
    assert.equal(big, 'payload_too_large');
    assert.match(deep!, /^invalid_arguments: .*nest at most 32 levels deep \(these nest 40\)/);
  });

  it('at most maxPendingCalls are out at once; the rest wait and all are answered', async () => {
    const { host, seen } = countingHost(30);
    const execution = await sandbox.run(`const all = await Promise.all(Array.from({length: 12}, (_, i) => call_tool('t' + i, {i}))); return all.length;`, host, { owner: 'a' });
    assert.ok(execution.ok, JSON.stringify(execution).slice(0, 300));
    assert.equal(execution.value, 12);
    assert.equal(seen.calls, 12);
    assert.ok(seen.maxInFlight <= 4, `${seen.maxInFlight} calls out at once`);
  });
});

describe('code mode: the service handles calls from all executions within maxCallBytesInFlight', () => {
  it('two executions sending 3 KB calls at once: never more than the budget of arguments in the service at a time, and every call answered', async () => {
    const gated = new Sandbox(sandboxSettingsSchema.parse({ timeoutMs: 8_000, maxCallBytesInFlight: 8_192, maxPendingCalls: 4, idleThreads: 2 }));
    const inService = { bytes: 0, most: 0 };
    const host: ToolHost = {
      async call(_name, args) {
        const bytes = JSON.stringify(args).length;
        inService.bytes += bytes;
        inService.most = Math.max(inService.most, inService.bytes);
        try {
          await new Promise((resolve) => setTimeout(resolve, 20));
          return 'ok';
        } finally {
          inService.bytes -= bytes;
        }
      },
      async search() {
        return [];
      },
    };
    try {
      const code = `const all = await Promise.all(Array.from({length: 8}, (_, i) => call_tool('t', {i, pad: 'p'.repeat(3000)}))); return all.length;`;
      const [a, b] = await Promise.all([gated.run(code, host, { owner: 'a' }), gated.run(code, host, { owner: 'b' })]);
      assert.deepEqual([a.ok && a.value, b.ok && b.value], [8, 8], JSON.stringify([a, b]).slice(0, 300));
      // Four calls of each execution are out of its thread at once (eight in all): the service takes them two at a time.
      assert.ok(inService.most <= 8_192, `${inService.most} bytes of arguments in the service at once`);
    } finally {
      await gated.close();
    }
  });

  it('a call stuck on a slow upstream gives its share back after a second: another execution\'s call is not held up until it ends', async () => {
    const gated = new Sandbox(sandboxSettingsSchema.parse({ timeoutMs: 15_000, maxCallBytesInFlight: 1_024, idleThreads: 0 }));
    const host: ToolHost = {
      async call(name) {
        if (name === 'slow') await new Promise((resolve) => setTimeout(resolve, 6_000));
        return name;
      },
      async search() {
        return [];
      },
    };
    try {
      const slow = gated.run(`return await call_tool('slow', {pad: 'p'.repeat(900)});`, host, { owner: 'a' });
      await new Promise((resolve) => setTimeout(resolve, 500));
      const started = performance.now();
      const fast = await gated.run(`return await call_tool('fast', {pad: 'p'.repeat(900)});`, host, { owner: 'b' });
      const waited = performance.now() - started;
      assert.ok(fast.ok && fast.value === 'fast', JSON.stringify(fast).slice(0, 300));
      assert.ok(waited < 4_000, `the second call waited ${Math.round(waited)} ms behind the slow one`);
      assert.ok((await slow).ok);
    } finally {
      await gated.close();
    }
  });

  it('calls still waiting when their execution ends are dropped, not sent to the service', async () => {
    const gated = new Sandbox(sandboxSettingsSchema.parse({ timeoutMs: 8_000, maxCallBytesInFlight: 1_024, maxPendingCalls: 4, idleThreads: 0 }));
    const { host, seen } = countingHost(50);
    try {
      const execution = await gated.run(`for (let i = 0; i < 4; i++) call_tool('t', {pad: 'p'.repeat(900)}).catch(() => {}); return 'left';`, host, { owner: 'a' });
      assert.ok(execution.ok && execution.value === 'left', JSON.stringify(execution).slice(0, 300));
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.ok(seen.calls <= 1, `${seen.calls} calls of an ended execution reached the service`);
    } finally {
      await gated.close();
    }
  });
});

describe('code mode: results and errors bounded, named', () => {
  it('a return value nested 6,000 deep is sandbox_output, not a stack overflow on the service', async () => {
    const { host } = countingHost();
    failedWith(await sandbox.run(`let v = 0; for (let i = 0; i < 6000; i++) v = [v]; return v;`, host, { owner: 'a' }), 'sandbox_output', /nests 6000 levels deep; at most 32/);
  });

  it('a 20 MB error message is cut, not emptied', async () => {
    const big = new Sandbox(sandboxSettingsSchema.parse({ timeoutMs: 8_000, memoryMb: 128, idleThreads: 0 }));
    try {
      const execution = await big.run(`throw new Error('x'.repeat(20000000));`, countingHost().host, { owner: 'a' });
      failedWith(execution, 'sandbox_error', /^Error: x{100}.*\(20000000 characters, cut\)/);
      assert.ok(!execution.ok && execution.error.message.length < 5_000);
    } finally {
      await big.close();
    }
  });

  it('out of memory caught and then hit again, and a flood of un-awaited promises: sandbox_memory or sandbox_timeout, never "null"', async () => {
    const short = new Sandbox(sandboxSettingsSchema.parse({ timeoutMs: 3_000, idleThreads: 0 }));
    // Filling 64 MB takes seconds on a loaded machine: this one gets the time to reach the cap.
    const long = new Sandbox(sandboxSettingsSchema.parse({ timeoutMs: 20_000, idleThreads: 0 }));
    try {
      const caught = await long.run(`const keep = []; try { while (true) keep.push('x'.repeat(100000) + keep.length); } catch (e) {} keep.push('y'.repeat(1000000)); return keep.length;`, countingHost().host, { owner: 'a' });
      failedWith(caught, 'sandbox_memory');
      const flood = await short.run(`const keep = []; for (;;) { keep.push(new Promise(() => {})); Promise.resolve().then(() => {}); }`, countingHost().host, { owner: 'a' });
      assert.equal(flood.ok, false);
      if (!flood.ok) assert.ok(['sandbox_memory', 'sandbox_timeout'].includes(flood.error.code), `${flood.error.code}: ${flood.error.message}`);
      failedWith(flood, flood.ok ? 'none' : flood.error.code);
      // The code's own `throw null` is named as such.
      failedWith(await short.run(`throw null;`, countingHost().host, { owner: 'a' }), 'sandbox_error', /threw a non-Error value: null/);
    } finally {
      await short.close();
      await long.close();
    }
  });

  it('jsonDepth reads nesting outside strings', () => {
    assert.equal(jsonDepth('1'), 0);
    assert.equal(jsonDepth('{"a":[1,{"b":"[[[["}]}'), 3);
    assert.equal(jsonDepth('"\\\\"'), 0);
    assert.equal(jsonDepth('["\\"[", [[]]]'), 3);
  });
});
