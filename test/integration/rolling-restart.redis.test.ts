import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type Balancer, startRoundRobin, untilInRotation } from '../helpers/balancer.js';
import { ADMIN_KEY, generateKey } from '../helpers/keys.js';
import { stdioFixtureServer } from '../helpers/mcp.js';
import { CliProcess, startWorker } from '../helpers/ops-processes.js';
import { dropPrefixKeys, eventually, REDIS_URL, writeConfig } from '../helpers/processes.js';
import { freePort } from '../helpers/redis-server.js';

/**
 * Issue 56: a rolling restart loses no call. Three `toolrouter serve` behind a round-robin HAProxy that checks /ready
 * (as docker/haproxy.cfg does); 2025-11-25 SDK sessions call a tool in a loop while each instance in turn gets
 * SIGTERM, drains (/ready 503, still serving), exits, restarts on its port and becomes ready again. Every call must
 * come back a result, none an error.
 */
const SESSIONS = 6;
const CALLS = 60;
const started: CliProcess[] = [];

async function serve(configFile: string): Promise<CliProcess> {
  const child = new CliProcess(['--config', configFile, 'serve']);
  started.push(child);
  await child.waitFor((l) => l.msg === 'toolrouter listening', 240_000);
  return child;
}

describe('rolling restart behind HAProxy', { timeout: 900_000 }, () => {
  const prefix = `tr-rolling-${process.pid}-${randomUUID().slice(0, 6)}`;
  let ports: number[] = [];
  let configs: string[] = [];
  let instances: CliProcess[] = [];
  let balancer: Balancer;
  let key: string;

  before(async () => {
    ports = [await freePort(), await freePort(), await freePort()];
    const settings = (port: number) => ({
      redisUrl: REDIS_URL,
      port,
      host: '127.0.0.1',
      adminKey: ADMIN_KEY,
      security: { allowedHosts: ['*'] },
      queue: { prefix, generationCheckMs: 300 },
      // HAProxy below checks every 1 s and takes a server out after 2 failures: out within ~2-3 s; 5 s leaves room.
      shutdown: { drainMs: 5_000 },
      mcp: { search: false, pingIntervalMs: 0, servers: { files: stdioFixtureServer() } },
    });
    configs = ports.map((port) => writeConfig(settings(port)));
    started.push((await startWorker(configs[0]!)).process);
    instances = await Promise.all(configs.map((config) => serve(config)));
    for (const port of ports) await eventually(() => fetch(`http://127.0.0.1:${port}/ready`).then((r) => r.status), (status) => status === 200, 120_000);
    balancer = await startRoundRobin(
      ports.map((port) => ({ host: '127.0.0.1', port })),
      { checkIntervalMs: 1_000, checkPath: '/ready', fall: 2, rise: 2, retryOn: 'conn-failure empty-response' },
    );
    key = (await generateKey(`http://127.0.0.1:${ports[0]}`, {})).key;
    await untilInRotation(balancer, 120_000);
  });

  after(async () => {
    await balancer?.stop();
    await Promise.all(started.map((child) => child.stop()));
    await dropPrefixKeys(prefix);
  });

  it(`${SESSIONS} sessions × ${CALLS}+ calls lose none while each of three instances restarts in turn`, async () => {
    const clients = await Promise.all(
      Array.from({ length: SESSIONS }, async () => {
        const client = new Client({ name: 'rolling', version: '1.0.0' });
        await client.connect(new StreamableHTTPClientTransport(new URL(`${balancer.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
        return client;
      }),
    );
    let restarting = true;
    const failures: string[] = [];
    let calls = 0;
    const loops = clients.map(async (client, s) => {
      for (let i = 0; restarting || i < CALLS; i++) {
        try {
          const result = (await client.callTool({ name: 'files__add', arguments: { a: s, b: i } })) as { isError?: boolean; content: { text: string }[] };
          if (result.isError || result.content[0]?.text !== String(s + i)) failures.push(`session ${s} call ${i}: ${JSON.stringify(result)}`);
        } catch (error) {
          failures.push(`session ${s} call ${i}: ${(error as Error).message}`);
        }
        calls++;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    });
    const timings: string[] = [];
    try {
      for (let n = 0; n < instances.length; n++) {
        const begun = Date.now();
        instances[n]!.signal('SIGTERM');
        // Draining: not ready, and still serving.
        const ready = await eventually(
          () => fetch(`http://127.0.0.1:${ports[n]}/ready`).then(async (r) => ({ status: r.status, body: (await r.json()) as { failing: string[] } })),
          (answer) => answer.status === 503,
          4_000,
        );
        assert.deepEqual(ready.body.failing, ['shutdown']);
        assert.equal((await fetch(`http://127.0.0.1:${ports[n]}/health`)).status, 200);
        const exit = await instances[n]!.exited;
        assert.equal(exit.code, 0, `instance ${n} exit ${JSON.stringify(exit)}: ${JSON.stringify(instances[n]!.logs.slice(-3))}`);
        const stoppedMs = Date.now() - begun;
        instances[n] = await serve(configs[n]!);
        await eventually(() => fetch(`http://127.0.0.1:${ports[n]}/ready`).then((r) => r.status, () => 0), (status) => status === 200, 120_000);
        // Back in HAProxy's rotation (rise 2 at 1 s) before the next one goes.
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        timings.push(`instance ${n}: exited ${stoppedMs} ms after SIGTERM, ready again after ${Date.now() - begun} ms`);
      }
    } finally {
      restarting = false;
      await Promise.all(loops);
      await Promise.all(clients.map((client) => client.close().catch(() => {})));
    }
    console.log(`rolling restart: ${calls} calls, ${failures.length} failed; ${timings.join('; ')}`);
    assert.ok(calls >= SESSIONS * CALLS);
    assert.deepEqual(failures, []);
  });
});
