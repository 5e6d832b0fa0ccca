/**
 * A rolling restart under load (issue 56, item 1): three `toolrouter serve` processes on one Redis behind a
 * round-robin HAProxy checking `/ready` as docker/haproxy.cfg does (every 2 s, fall 2, rise 2, retry-on conn-failure
 * empty-response). `sessions` MCP SDK clients call an upstream tool in a loop while each instance in turn gets
 * SIGTERM, exits, is started again on its port and becomes ready. Used by test/integration/ops-rolling-restart.test.ts
 * (small) and bench/rolling-restart.ts (30 sessions × 300 calls).
 */
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Redis } from 'ioredis';
import { startHttpFixture } from '../fixtures/mcp/http-server.js';
import { startRoundRobin } from './balancer.js';
import { CliProcess, startWorker } from './ops-processes.js';
import { eventually, REDIS_URL, writeConfig } from './processes.js';
import { freePort } from './redis-server.js';

export interface RollingRestartResult {
  calls: number;
  failures: { session: number; error: string }[];
  restarts: { instance: number; exitCode: number | null; stopMs: number; backMs: number }[];
}

export async function rollingRestart({ sessions, calls, log = () => {} }: { sessions: number; calls: number; log?: (line: string) => void }): Promise<RollingRestartResult> {
  const prefix = `tr-rolling-${process.pid}-${randomUUID().slice(0, 6)}`;
  const fixture = await startHttpFixture();
  const config = writeConfig({
    redisUrl: REDIS_URL,
    host: '127.0.0.1',
    security: { allowedHosts: ['*'] },
    queue: { prefix },
    catalog: { sources: { local: [{ name: 'noop', description: 'does nothing', inputSchema: { type: 'object' } }] } },
    mcp: { search: false, callTimeoutMs: 30_000, servers: { fx: { url: fixture.url } } },
    // The documented defaults: 8 s of drain (the default) for a balancer checking every 2 s with fall 2.
    shutdown: { drainMs: 8_000 },
  });
  const ports = await Promise.all([freePort(), freePort(), freePort()]);
  const processes: CliProcess[] = [];
  const all: CliProcess[] = [];
  const clients: Client[] = [];
  const result: RollingRestartResult = { calls: 0, failures: [], restarts: [] };
  let balancer: Awaited<ReturnType<typeof startRoundRobin>> | undefined;
  try {
    // The index worker: with Redis, /ready waits for an index it builds.
    all.push((await startWorker(config)).process);
    const start = async (i: number) => {
      const child = new CliProcess(['--config', config, 'serve'], { PORT: String(ports[i]) });
      all.push(child);
      processes[i] = child;
      await child.waitFor((l) => l.msg === 'toolrouter listening', 240_000);
      await eventually(() => fetch(`http://127.0.0.1:${ports[i]}/ready`).then((r) => r.status, () => 0), (status) => status === 200, 240_000);
    };
    await Promise.all([0, 1, 2].map(start));
    const lb = (balancer = await startRoundRobin(
      ports.map((port) => ({ host: '127.0.0.1', port })),
      { checkIntervalMs: 2_000, checkPath: '/ready', fall: 2, rise: 2, retryOn: 'conn-failure empty-response' },
    ));
    let through = 0;
    await eventually(async () => (through = (await fetch(`${lb.url}/ready`).then((r) => r.ok, () => false)) ? through + 1 : 0), (n) => n >= 6, 120_000);
    for (let i = 0; i < sessions; i++) {
      const client = new Client({ name: `rolling-${i}`, version: '1.0.0' });
      client.onerror = () => {};
      await client.connect(new StreamableHTTPClientTransport(new URL(`${lb.url}/mcp`)));
      clients.push(client);
    }
    await eventually(() => clients[0]!.listTools(), (list) => list.tools.some((tool) => tool.name === 'fx__list_issues'), 60_000);
    let restarting = true;
    const loops = clients.map(async (client, session) => {
      for (let n = 0; restarting || n < calls; n++) {
        result.calls++;
        try {
          const answer = await client.callTool({ name: 'fx__list_issues', arguments: {} });
          if (answer.isError) result.failures.push({ session, error: JSON.stringify(answer.content) });
        } catch (error) {
          result.failures.push({ session, error: (error as Error).message });
        }
      }
    });
    for (const i of [0, 1, 2]) {
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const t0 = performance.now();
      processes[i]!.signal('SIGTERM');
      const exit = await processes[i]!.exited;
      const stopMs = performance.now() - t0;
      await start(i);
      // Back in the balancer: rise 2 checks at 2 s.
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      result.restarts.push({ instance: i, exitCode: exit.code, stopMs: Math.round(stopMs), backMs: Math.round(performance.now() - t0) });
      log(`instance ${i}: exit ${exit.code} after ${Math.round(stopMs)} ms, back after ${Math.round(performance.now() - t0)} ms; ${result.calls} calls, ${result.failures.length} failed`);
    }
    restarting = false;
    await Promise.all(loops);
  } finally {
    await Promise.all(clients.map((client) => client.close().catch(() => {})));
    await balancer?.stop();
    await Promise.all(all.map((child) => child.stop()));
    await fixture.close();
    const redis = new Redis(REDIS_URL);
    const leftovers = [...(await redis.keys(`${prefix}*`)), ...(await redis.keys(`bull:${prefix}*`))];
    if (leftovers.length > 0) await redis.del(...leftovers);
    redis.disconnect();
  }
  return result;
}
