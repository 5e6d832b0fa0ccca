/**
 * Issue 53: the audit trail of three instances behind a round-robin HAProxy is one Redis stream with one chain. Calls
 * permitted and denied through the balancer leave a record each, from every instance; an instance SIGKILLed while
 * calls are in flight loses none of the records the stream already acknowledged and leaves the chain intact
 * (`toolrouter audit verify` passes afterwards), and the survivors append after it.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AuditRecord } from '../../src/audit/types.js';
import { type Balancer, startRoundRobin, untilInRotation } from '../helpers/balancer.js';
import { ADMIN_KEY, call } from '../helpers/keys.js';
import { stdioFixtureServer } from '../helpers/mcp.js';
import { CLI, CliProcess, runToEnd, startWorker } from '../helpers/ops-processes.js';
import { dropPrefixKeys, eventually, REDIS_URL, writeConfig } from '../helpers/processes.js';
import { freePort } from '../helpers/redis-server.js';

const POLICIES = `
@id("small-sums")
permit (principal, action == Action::"call_tool", resource)
when { resource.name == "add" && context.arguments has a && context.arguments.a < 1000 };
`;

const started: CliProcess[] = [];

async function serve(configFile: string): Promise<CliProcess> {
  const child = new CliProcess(['--config', configFile, 'serve']);
  started.push(child);
  await child.waitFor((l) => l.msg === 'toolrouter listening', 240_000);
  return child;
}

function verify(configFile: string): ReturnType<typeof runToEnd> {
  return runToEnd([...CLI, '--config', configFile, 'audit', 'verify']);
}

describe('audit trail of three instances behind HAProxy', { timeout: 600_000 }, () => {
  const prefix = `tr-audit-${process.pid}-${randomUUID().slice(0, 6)}`;
  let ports: number[] = [];
  let configs: string[] = [];
  let instances: CliProcess[] = [];
  let balancer: Balancer;

  before(async () => {
    const policyFile = path.join(mkdtempSync(path.join(tmpdir(), 'tr-audit-instances-')), 'policies.cedar');
    writeFileSync(policyFile, POLICIES);
    ports = [await freePort(), await freePort(), await freePort()];
    const settings = (port: number) => ({
      redisUrl: REDIS_URL,
      port,
      host: '127.0.0.1',
      adminKey: ADMIN_KEY,
      security: { allowedHosts: ['*'] },
      queue: { prefix, generationCheckMs: 300 },
      shutdown: { drainMs: 0 },
      policy: { files: [policyFile] },
      audit: { arguments: 'full' },
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
    await untilInRotation(balancer, 120_000);
  });

  after(async () => {
    await balancer?.stop();
    await Promise.all(started.map((child) => child.stop()));
    await dropPrefixKeys(prefix);
  });

  const sum = (a: number) => call(balancer.url, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, body: { name: 'files__add', arguments: { a, b: 1 } } });
  const trail = async (via = balancer.url): Promise<AuditRecord[]> => {
    const page = await call(via, 'GET', '/v1/audit?limit=1000', { key: ADMIN_KEY });
    assert.equal(page.status, 200, JSON.stringify(page.body));
    return page.body.records as AuditRecord[];
  };

  it('records every attempt from every instance in one chain, and keeps it whole when an instance dies mid-call', async () => {
    for (let n = 0; n < 30; n++) {
      const reply = await sum(n % 3 === 0 ? 5000 + n : n);
      assert.equal(reply.status, n % 3 === 0 ? 403 : 200, JSON.stringify(reply.body));
    }
    const first = await eventually(() => trail(), (records) => records.length >= 30, 30_000);
    assert.equal(first.length, 30);
    assert.equal(new Set(first.map((record) => record.instance)).size, 3, 'records from all three instances');
    assert.equal(first.filter((record) => record.decision === 'deny').length, 10);
    assert.ok(first.filter((record) => record.decision === 'deny').every((record) => record.outcome === 'not_run' && record.policies.length === 0));
    assert.ok(first.filter((record) => record.decision === 'permit').every((record) => record.outcome === 'ok' && record.policies[0] === 'small-sums'));
    const intact = await verify(configs[0]!);
    assert.equal(intact.code, 0, intact.stderr);

    // Calls in flight on all three while one is killed: its queued records may go with it, acknowledged ones stay.
    const burst = Promise.all(Array.from({ length: 30 }, (_, n) => sum(100 + n).catch(() => undefined)));
    instances[2]!.signal('SIGKILL');
    await burst;
    // The balancer takes the dead one out (fall 2 at 1 s); the survivors go on appending after whatever it left.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    for (let n = 0; n < 6; n++) assert.equal((await sum(200 + n)).status, 200);
    const after = await eventually(() => trail(`http://127.0.0.1:${ports[0]}`), (records) => records.some((record) => record.arguments && (record.arguments as { a: number }).a === 205), 30_000);
    const ids = new Set(after.map((record) => record.id));
    assert.ok(first.every((record) => ids.has(record.id)), 'every record acknowledged before the kill is still there');
    const verified = await verify(configs[0]!);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, new RegExp(`intact: ${after.length} record`));
  });
});
