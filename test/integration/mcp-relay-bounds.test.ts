import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ADMIN_KEY, mcpClientWithKey } from '../helpers/keys.js';
import { textOf } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const FIXTURE = path.join(REPO_ROOT, 'test/fixtures/mcp/relay-server.ts');
const MiB = 1024 * 1024;

/** The relay fixture over streamable HTTP in its own process, so the memory measured here is toolrouter's alone. */
async function relayHttpProcess(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], { cwd: REPO_ROOT, env: { ...process.env, RELAY_HTTP: '1' }, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (out.includes('\n')) resolve(out.split('\n')[0]!.trim());
    });
    child.once('exit', (code) => reject(new Error(`fixture exited (${code})`)));
  });
  return { url, child };
}

/**
 * Runs `work` while sampling this process's RSS and timing GET /health every 50 ms; returns the peak RSS above the
 * level before and the slowest /health answer.
 */
async function measured<T>(api: RunningRouter, work: () => Promise<T>): Promise<{ value: T; rssGrowthMb: number; slowestHealthMs: number }> {
  global.gc?.();
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  let slowest = 0;
  let running = true;
  const sampler = (async () => {
    while (running) {
      peak = Math.max(peak, process.memoryUsage().rss);
      const started = performance.now();
      const health = await fetch(`${api.url}/health`);
      await health.text();
      slowest = Math.max(slowest, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  try {
    const value = await work();
    return { value, rssGrowthMb: (peak - baseline) / MiB, slowestHealthMs: slowest };
  } finally {
    running = false;
    await sampler;
  }
}

describe('result bound: mcp.maxResultBytes refuses an oversized upstream result without holding it', () => {
  let api: RunningRouter;
  let fixture: { url: string; child: ChildProcess };
  let client: Client;

  before(async () => {
    fixture = await relayHttpProcess();
    api = await startRouter({
      adminKey: ADMIN_KEY,
      mcp: {
        search: true,
        callTimeoutMs: 60_000,
        maxResultBytes: 4 * MiB,
        servers: { web: { url: fixture.url }, st: { command: process.execPath, args: ['--import', 'tsx', FIXTURE], cwd: REPO_ROOT } },
      },
    });
    await api.router.mcp.upstreams.settled();
    client = await mcpClientWithKey(api.url, ADMIN_KEY);
  });

  after(async () => {
    await client?.close().catch(() => {});
    await api?.close();
    fixture?.child.kill();
  });

  it('a result over the bound is a clear isError; one under it passes whole; the connection stays up', async () => {
    for (const server of ['web', 'st']) {
      const refused: any = await client.callTool({ name: `${server}__big`, arguments: { mb: 6 } });
      assert.equal(refused.isError, true, server);
      assert.match(textOf(refused), /result too large: \d+ bytes is more than mcp\.maxResultBytes \(4194304\)/, server);
      const fine: any = await client.callTool({ name: 'call_tool', arguments: { name: `${server}__big`, arguments: { mb: 3 } } });
      assert.equal(fine.isError, undefined, server);
      assert.equal(textOf(fine).length, 3 * MiB, server);
    }
    assert.deepEqual(
      api.router.mcp.upstreams.status().map((status) => [status.name, status.state]),
      [
        ['web', 'connected'],
        ['st', 'connected'],
      ],
    );
  });

  for (const server of ['web', 'st']) {
    it(`8 concurrent 50 MB results from the ${server === 'web' ? 'HTTP' : 'stdio'} upstream: RSS stays bounded and /health answers within a second`, async () => {
      const { value, rssGrowthMb, slowestHealthMs } = await measured(api, () =>
        Promise.all(Array.from({ length: 8 }, () => client.callTool({ name: `${server}__big`, arguments: { mb: 50 } }, undefined, { timeout: 60_000 }))),
      );
      for (const result of value) assert.match(textOf(result), /result too large: 52428\d+ bytes/);
      // Unbounded, the 400 MB would be held (several times over while parsed); bounded, each call holds at most 4 MiB.
      assert.ok(rssGrowthMb < 150, `RSS grew by ${rssGrowthMb.toFixed(0)} MB`);
      assert.ok(slowestHealthMs < 1_000, `/health took ${slowestHealthMs.toFixed(0)} ms`);
      console.log(`# ${server}: 8 x 50 MB refused; RSS growth ${rssGrowthMb.toFixed(0)} MB, slowest /health ${slowestHealthMs.toFixed(0)} ms`);
    });
  }
});
