/**
 * Code mode end to end: a real toolrouter with a stdio upstream (files) and a streamable HTTP upstream (tracker), real
 * SDK clients on /mcp (2025-11-25 sessions and the 2026-07-28 revision), and code that reaches both through `execute`.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/http-server.js';
import { ADMIN_KEY, call, generateKey, mcpClientWithKey } from '../helpers/keys.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const TIMEOUT_MS = 3_000;

/** One execute call: the parsed result (structuredContent) or the error text, and the raw result. */
async function execute(client: Client, code: string): Promise<{ ok: boolean; result?: any; error?: string; logs?: string[]; raw: any }> {
  const raw: any = await client.callTool({ name: 'execute', arguments: { code } }, undefined, { timeout: 30_000 });
  if (raw.isError) return { ok: false, error: textOf(raw), raw };
  return { ok: true, result: raw.structuredContent.result, logs: raw.structuredContent.logs, raw };
}

describe('code mode over /mcp', () => {
  let tracker: HttpFixture;
  let api: RunningRouter;
  let admin: Client;

  before(async () => {
    tracker = await startHttpFixture();
    api = await startRouter({
      adminKey: ADMIN_KEY,
      mcp: {
        search: true,
        codeMode: true,
        servers: {
          files: stdioFixtureServer(),
          tracker: { url: tracker.url },
          features: { command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/features-server.ts')], cwd: REPO_ROOT },
        },
        sandbox: { timeoutMs: TIMEOUT_MS, maxConcurrentPerKey: 1 },
      },
    });
    await api.router.mcp.upstreams.settled();
    await api.indexed();
    admin = await mcpClientWithKey(api.url, ADMIN_KEY);
  });

  after(async () => {
    await admin?.close();
    await api?.close();
    await tracker?.close();
  });

  it('lists execute beside search_tools and call_tool, with the model-facing contract', async () => {
    const { tools } = await admin.listTools();
    const names = tools.map((tool) => tool.name);
    assert.deepEqual(names.filter((name) => ['search_tools', 'call_tool', 'execute'].includes(name)), ['search_tools', 'call_tool', 'execute']);
    const tool = tools.find((t) => t.name === 'execute')!;
    assert.match(tool.description!, /await call_tool\(name, arguments\)/);
    assert.deepEqual(tool.inputSchema.required, ['code']);
  });

  it('one execute call chains calls across two upstream servers and returns the combination', async () => {
    const answer = await execute(
      admin,
      `const sum = await call_tool('files__add', {a: 2, b: 3});           // stdio, structured result
       const issues = JSON.parse(await call_tool('tracker__list_issues', {state: 'open'}));   // HTTP, text result
       const file = await call_tool('tracker__get_file', {path: 'README.md'});              // HTTP, structured
       const echoed = await call_tool('files__echo', {text: 'issue #' + issues[0].number});
       console.log('read', issues.length, 'issue(s)');
       return {total: sum.sum + issues[0].number + file.size, echoed, file: file.path};`,
    );
    assert.ok(answer.ok, answer.error ?? '');
    assert.deepEqual(answer.result, { total: 2 + 3 + 7 + 5, echoed: 'issue #7', file: 'README.md' });
    assert.deepEqual(answer.logs, ['read 1 issue(s)']);
    assert.equal(answer.raw.structuredContent.calls, 4);
    assert.equal(JSON.parse(answer.raw.content[0].text).total, 17, 'the text content is the same JSON, for clients that read text');
  });

  it('upstream errors are exceptions the code catches: a tool error result and a failing server', async () => {
    const answer = await execute(
      admin,
      `const seen = [];
       try { await call_tool('files__fail', {}); } catch (e) { seen.push([e.code, e.message]); }
       try { await call_tool('tracker__broken', {}); } catch (e) { seen.push([e.code, e.message]); }
       try { await call_tool('files__add', {a: 'not a number'}); } catch (e) { seen.push([e.code, e.message]); }
       try { await call_tool('nobody__nothing', {}); } catch (e) { seen.push([e.code, e.message]); }
       return seen;`,
    );
    assert.ok(answer.ok, answer.error ?? '');
    const [fail, broken, invalid, unknown] = answer.result;
    assert.equal(fail[0], 'tool_error');
    assert.match(fail[1], /fixture failure/);
    assert.equal(broken[0], 'tool_error');
    assert.match(broken[1], /tracker backend is unreachable/);
    assert.equal(invalid[0], 'tool_error');
    assert.match(invalid[1], /invalid arguments for "files__add"/);
    assert.equal(unknown[0], 'invalid_request');
    assert.match(unknown[1], /unknown tool "nobody__nothing"/);
  });

  it('searches, then calls what it found by its signature', async () => {
    const answer = await execute(
      admin,
      `const found = await search_tools('add two numbers and return the sum', {top_k: 3});
       const add = found.find((tool) => tool.signature.includes('Promise<{ sum: number; }>'));
       const result = await call_tool(add.name, {a: 20, b: 22});
       return {name: add.name, signature: add.signature, sum: result.sum};`,
    );
    assert.ok(answer.ok, answer.error ?? '');
    assert.equal(answer.result.name, 'files__add');
    assert.match(answer.result.signature, /declare function call_tool\(name: "files__add", args: \{ \/\*\* first addend \*\/ a: number; \/\*\* second addend \*\/ b: number; \}\): Promise<\{ sum: number; \}>;/);
    assert.equal(answer.result.sum, 42);
  });

  it('search_tools answers with signatures by default in code mode; /v1/tools/search gives them with detail "code"', async () => {
    const result: any = await admin.callTool({ name: 'search_tools', arguments: { query: 'add two numbers', top_k: 2 } });
    const first = result.structuredContent.tools[0];
    assert.equal(first.name, 'files__add');
    assert.match(first.signature, /^\/\*\* Add two numbers and return their sum \*\/\ndeclare function call_tool/);
    assert.equal(first.inputSchema, undefined, 'no JSON Schema in the code form');
    const full: any = await admin.callTool({ name: 'search_tools', arguments: { query: 'add two numbers', top_k: 1, detail: 'full' } });
    assert.ok(full.structuredContent.tools[0].inputSchema);
    const rest = await call(api.url, 'POST', '/v1/tools/search', { key: ADMIN_KEY, body: { query: 'add two numbers', top_k: 1, detail: 'code' } });
    assert.equal(rest.status, 200, JSON.stringify(rest.body));
    assert.equal(rest.body.results[0].name, 'files__add');
    assert.match(rest.body.results[0].signature, /Promise<\{ sum: number; \}>/);
  });

  it('code cannot reach toolrouter\'s own tools: no recursion through execute or call_tool', async () => {
    const answer = await execute(
      admin,
      `const codes = [];
       for (const name of ['execute', 'call_tool', 'search_tools']) {
         try { await call_tool(name, {code: 'return 1', name: 'files__echo', query: 'x'}); codes.push('called'); } catch (e) { codes.push(e.code); }
       }
       return codes;`,
    );
    assert.ok(answer.ok, answer.error ?? '');
    assert.deepEqual(answer.result, ['recursion', 'recursion', 'recursion']);
    const through: any = await admin.callTool({ name: 'call_tool', arguments: { name: 'execute', arguments: { code: 'return 1' } } });
    assert.equal(through.isError, true);
    assert.match(textOf(through), /toolrouter's own tools/);
  });

  it('an endless loop ends with isError at the deadline while /health keeps answering within a second', async () => {
    const running = execute(admin, 'while (true) {}');
    const started = Date.now();
    const delays: number[] = [];
    while (Date.now() - started < TIMEOUT_MS - 500) {
      const asked = Date.now();
      const health = await fetch(`${api.url}/health`);
      assert.equal(health.status, 200);
      delays.push(Date.now() - asked);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const answer = await running;
    assert.equal(answer.ok, false);
    assert.match(answer.error!, /^sandbox_timeout: /);
    assert.ok(delays.length >= 5, `${delays.length} health checks during the loop`);
    assert.ok(Math.max(...delays) < 1_000, `slowest /health during the loop: ${Math.max(...delays)} ms`);
    // And the service goes on: the next execution runs.
    assert.deepEqual((await execute(admin, 'return 1 + 1')).result, 2);
  });

  it('a memory bomb, deep recursion and escape attempts end in that execution only', async () => {
    const bomb = await execute(admin, `const keep = []; while (true) keep.push('x'.repeat(1 << 16) + keep.length);`);
    assert.equal(bomb.ok, false);
    assert.match(bomb.error!, /^sandbox_memory: /);
    const recursion = await execute(admin, 'const f = (n) => f(n + 1) + 1; return f(0);');
    assert.equal(recursion.ok, false);
    assert.match(recursion.error!, /^sandbox_error: .*(stack overflow|call stack)/i);
    const escapes = await execute(
      admin,
      `const kinds = [typeof process, typeof require, typeof fetch, typeof setTimeout, typeof Buffer,
         (function () {}).constructor('return typeof process')(), eval('typeof require')];
       let imported; try { await import('node:child_process'); imported = 'imported'; } catch (e) { imported = 'refused'; }
       Object.prototype.toolrouterPolluted = true;
       return {kinds, imported};`,
    );
    assert.ok(escapes.ok, escapes.error ?? '');
    assert.deepEqual(escapes.result, { kinds: Array(7).fill('undefined'), imported: 'refused' });
    assert.equal(({} as Record<string, unknown>).toolrouterPolluted, undefined);
    assert.deepEqual((await execute(admin, `return call_tool('files__echo', {text: 'still here'})`)).result, 'still here');
  });

  it('executions at once are bounded per key', async () => {
    const long = execute(admin, `return await call_tool('files__slow', {ms: 800});`);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const second = await execute(admin, 'return 1');
    assert.equal(second.ok, false);
    assert.match(second.error!, /^busy: too many code executions at once \(at most 1 per key\)/);
    assert.deepEqual((await long).result, 'waited 800 ms');
  });

  it('executions are counted in /metrics by outcome, with their time and calls', async () => {
    const scrape = async () => String((await call(api.url, 'GET', '/metrics', { key: ADMIN_KEY })).body);
    const value = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    const before = await scrape();
    assert.deepEqual((await execute(admin, `return [await call_tool('files__echo', {text: 'a'}), await call_tool('files__echo', {text: 'b'})]`)).result, ['a', 'b']);
    assert.match((await execute(admin, 'throw new Error("no")')).error!, /^sandbox_error: /);
    const after = await scrape();
    assert.equal(value(after, 'toolrouter_code_executions_total{outcome="ok"}') - value(before, 'toolrouter_code_executions_total{outcome="ok"}'), 1);
    assert.equal(value(after, 'toolrouter_code_executions_total{outcome="sandbox_error"}') - value(before, 'toolrouter_code_executions_total{outcome="sandbox_error"}'), 1);
    assert.equal(value(after, 'toolrouter_code_execution_duration_seconds_count') - value(before, 'toolrouter_code_execution_duration_seconds_count'), 2);
    assert.equal(value(after, 'toolrouter_code_execution_calls_sum') - value(before, 'toolrouter_code_execution_calls_sum'), 2, 'two calls from the first execution, none from the second');
  });

  it('progress of a call from code reaches the client under the execute call\'s token; cancelling execute cancels the call', async () => {
    const progress: number[] = [];
    const counted: any = await admin.callTool({ name: 'execute', arguments: { code: `return await call_tool('features__countdown', {steps: 3})` } }, undefined, {
      onprogress: (update) => progress.push(update.progress),
    });
    assert.equal(counted.structuredContent.result, 'counted 3');
    // Relayed notifications travel beside the result, not before it: the last may land just after.
    await waitFor('three progress notifications', () => progress.length >= 3, 5_000);
    assert.deepEqual(progress, [1, 2, 3]);

    const controller = new AbortController();
    const running = admin.callTool({ name: 'execute', arguments: { code: `return await call_tool('features__wait_for_cancel', {ms: 20000})` } }, undefined, { signal: controller.signal });
    setTimeout(() => controller.abort(), 500);
    await assert.rejects(running);
    await waitFor('the upstream call to be cancelled', async () => {
      const result: any = await admin.callTool({ name: 'features__cancellations', arguments: {} });
      return textOf(result) === '1';
    });
  });

  it('the 2026-07-28 revision runs execute the same way', async () => {
    const client = new ClientV2({ name: 'codemode-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new HttpTransportV2(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}` } } }));
    try {
      const { tools } = await client.listTools();
      assert.ok(tools.some((tool) => tool.name === 'execute'));
      const result: any = await client.callTool({ name: 'execute', arguments: { code: `const a = await call_tool('files__add', {a: 1, b: 1}); const f = await call_tool('tracker__get_file', {path: 'x'}); return a.sum + f.size;` } });
      assert.equal(result.isError, undefined, textOf(result));
      assert.equal(result.structuredContent.result, 7);
    } finally {
      await client.close();
    }
  });

  describe('keys', () => {
    it('a restricted key\'s code is refused a tool outside its scope, as its direct call is', async () => {
      const { key } = await generateKey(api.url, { allowed_servers: ['files'] });
      const client = await mcpClientWithKey(api.url, key);
      try {
        const answer = await execute(
          client,
          `const out = {echo: await call_tool('files__echo', {text: 'mine'})};
           try { await call_tool('tracker__list_issues', {}); out.tracker = 'reached'; } catch (e) { out.tracker = e.code + ': ' + e.message; }
           out.found = (await search_tools('list issues of the tracker', {top_k: 10})).map((tool) => tool.name);
           return out;`,
        );
        assert.ok(answer.ok, answer.error ?? '');
        assert.equal(answer.result.echo, 'mine');
        assert.match(answer.result.tracker, /^forbidden: tool "tracker__list_issues" is not available to this key/);
        assert.ok(answer.result.found.every((name: string) => name.startsWith('files__')), JSON.stringify(answer.result.found));
        await assert.rejects(client.callTool({ name: 'tracker__list_issues', arguments: {} }), /not available to this key/);
      } finally {
        await client.close();
      }
    });

    it('code_mode_enabled: false hides execute from a key; true gives it where mcp.codeMode is off', async () => {
      const { key } = await generateKey(api.url, { code_mode_enabled: false });
      const info = await call(api.url, 'GET', `/key/info?key=${key}`, { key: ADMIN_KEY });
      assert.equal(info.body.info.code_mode_enabled, false);
      const client = await mcpClientWithKey(api.url, key);
      try {
        const { tools } = await client.listTools();
        assert.ok(!tools.some((tool) => tool.name === 'execute'));
        const refused: any = await client.callTool({ name: 'execute', arguments: { code: 'return 1' } }).catch((error: Error) => ({ rejected: error.message }));
        assert.match(refused.rejected ?? textOf(refused), /unknown tool "execute"/);
        const result: any = await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers', top_k: 1 } });
        assert.ok(result.structuredContent.tools[0].inputSchema, 'without code mode search_tools gives full definitions by default');
      } finally {
        await client.close();
      }
    });
  });
});

describe('code mode off', () => {
  let api: RunningRouter;
  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, mcp: { search: true, servers: { files: stdioFixtureServer() } } });
    await api.router.mcp.upstreams.settled();
  });
  after(async () => {
    await api?.close();
  });

  it('lists no execute, except for a key with code_mode_enabled: true', async () => {
    const plain = await mcpClientWithKey(api.url, ADMIN_KEY);
    const { key } = await generateKey(api.url, { code_mode_enabled: true });
    const coder = await mcpClientWithKey(api.url, key);
    try {
      assert.ok(!(await plain.listTools()).tools.some((tool) => tool.name === 'execute'));
      assert.ok((await coder.listTools()).tools.some((tool) => tool.name === 'execute'));
      const result: any = await coder.callTool({ name: 'execute', arguments: { code: `return (await call_tool('files__add', {a: 4, b: 5})).sum` } });
      assert.equal(result.structuredContent.result, 9);
    } finally {
      await plain.close();
      await coder.close();
    }
  });
});
