/**
 * Code mode against hostile code on a real toolrouter (issue 50, items 1, 6, 7): real SDK clients on /mcp with real
 * keys, a real stdio upstream. Four flooding executions over two keys leave /health answering and the process's memory
 * near idle; deep arguments and results get sandbox answers, counted by outcome in /metrics; calls from code count
 * against the key's rpm_limit.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ADMIN_KEY, call, generateKey, mcpClientWithKey } from '../helpers/keys.js';
import { stdioFixtureServer, textOf } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const TIMEOUT_MS = 10_000;

async function execute(client: Client, code: string): Promise<{ ok: boolean; result?: any; error?: string; raw: any }> {
  const raw: any = await client.callTool({ name: 'execute', arguments: { code } }, undefined, { timeout: 60_000 });
  if (raw.isError) return { ok: false, error: textOf(raw), raw };
  return { ok: true, result: raw.structuredContent.result, raw };
}

describe('code mode hardening over /mcp', () => {
  let api: RunningRouter;
  const clients: Client[] = [];

  before(async () => {
    api = await startRouter({
      adminKey: ADMIN_KEY,
      mcp: { search: false, codeMode: true, pingIntervalMs: 0, servers: { files: stdioFixtureServer() }, sandbox: { timeoutMs: TIMEOUT_MS } },
    });
    await api.router.mcp.upstreams.settled();
  });

  after(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await api?.close();
  });

  const clientFor = async (spec: Record<string, unknown> = {}) => {
    const { key } = await generateKey(api.url, spec);
    const client = await mcpClientWithKey(api.url, key);
    clients.push(client);
    return client;
  };

  it('four executions over two keys flooding un-awaited 900 KB calls: /health under 1 s, RSS within +300 MB, each ended with sandbox_calls', async () => {
    const [one, two] = [await clientFor(), await clientFor()];
    // Warm: an execution and a call, so idle memory includes the sandbox threads and the upstream path.
    assert.equal((await execute(one, `return await call_tool('files__echo', {text: 'warm'})`)).result, 'warm');
    global.gc?.();
    const idle = process.memoryUsage().rss;
    const flood = `const s = 'p'.repeat(900000); for (;;) { call_tool('files__echo', {text: s}).catch(() => {}); }`;
    // The event loop's own delay tells a blocked main thread apart from a starved process when /health is slow.
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const cpu = process.threadCpuUsage();
    const runs = [execute(one, flood), execute(one, flood), execute(two, flood), execute(two, flood)];
    let finished = false;
    void Promise.allSettled(runs).then(() => (finished = true));
    const delays: number[] = [];
    let peak = idle;
    const started = Date.now();
    while (!finished && Date.now() - started < 60_000) {
      const asked = performance.now();
      const health = await fetch(`${api.url}/health`);
      assert.equal(health.status, 200);
      await health.arrayBuffer();
      delays.push(performance.now() - asked);
      peak = Math.max(peak, process.memoryUsage().rss);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const answers = await Promise.all(runs);
    loop.disable();
    const used = process.threadCpuUsage(cpu);
    assert.ok(delays.length >= 3, `${delays.length} health checks`);
    const grown = (peak - idle) / 1_048_576;
    const seen = `RSS +${Math.round(grown)} MB over idle ${Math.round(idle / 1_048_576)} MB; /health delays ${delays.map(Math.round).join(' ')} ms; event loop delay p99 ${Math.round(loop.percentile(99) / 1e6)} ms, max ${Math.round(loop.max / 1e6)} ms; main thread CPU ${Math.round((used.user + used.system) / 1_000)} ms; ${answers.map((answer) => answer.error?.slice(0, 40)).join(' | ')}`;
    assert.ok(grown < 300, seen);
    assert.ok(Math.max(...delays) < 1_000, seen);
    for (const answer of answers) {
      assert.equal(answer.ok, false);
      // Ended after twice maxCalls attempts; on a machine too loaded to make 101 attempts of 900 KB in time, the deadline.
      assert.match(answer.error!, /^sandbox_(calls: the code kept calling past its limit of 50 calls|timeout: )/);
    }
    // And the service goes on.
    assert.equal((await execute(two, `return await call_tool('files__echo', {text: 'after'})`)).result, 'after');
  });

  it('arguments nested 10,000 deep: invalid_arguments inside the code (not "upstream unavailable"); a result nested 6,000 deep: sandbox_output, counted so', async () => {
    const client = await clientFor();
    const args = await execute(client, `let v = 0; for (let i = 0; i < 10000; i++) v = {v}; try { await call_tool('files__echo', {text: 'x', v}); return 'sent'; } catch (e) { return e.code + ': ' + e.message; }`);
    assert.ok(args.ok, args.error ?? '');
    assert.match(args.result, /^invalid_arguments: the arguments of one call may nest at most 64 levels deep/);
    const scrape = async () => String((await call(api.url, 'GET', '/metrics', { key: ADMIN_KEY })).body);
    const value = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    const before = await scrape();
    const deep = await execute(client, `let v = 0; for (let i = 0; i < 6000; i++) v = [v]; return v;`);
    assert.equal(deep.ok, false);
    assert.match(deep.error!, /^sandbox_output: the return value nests 6000 levels deep/);
    const after = await scrape();
    const series = (outcome: string) => `toolrouter_code_executions_total{outcome="${outcome}"}`;
    assert.equal(value(after, series('sandbox_output')) - value(before, series('sandbox_output')), 1);
    assert.equal(value(after, series('ok')) - value(before, series('ok')), 0);
    // The upstream is still connected and reachable.
    const still = await execute(client, `return await call_tool('files__echo', {text: 'still'})`);
    assert.equal(still.result, 'still', still.error ?? '');
  });

  it('calls from code count against the key\'s rpm_limit, as direct calls do', async () => {
    const client = await clientFor({ rpm_limit: 5 });
    // The execute call itself is one request; its code's calls are the others.
    const answer = await execute(client, `const seen = []; for (let i = 0; i < 8; i++) { try { await call_tool('files__echo', {text: 'n' + i}); seen.push('ok'); } catch (e) { seen.push(e.code); } } return seen;`);
    assert.ok(answer.ok, answer.error ?? '');
    assert.ok(answer.result.includes('rate_limited'), JSON.stringify(answer.result));
    assert.ok(answer.result.filter((outcome: string) => outcome === 'ok').length <= 5, JSON.stringify(answer.result));
  });
});
