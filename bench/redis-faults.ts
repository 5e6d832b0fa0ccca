/**
 * How fast toolrouter tells the truth when Redis goes away (issue 43): one API instance and one worker process on
 *   1. a single Redis (private, OS-picked port) that is killed: catalog PUTs and key writes until 503;
 *   2. a 3-master Redis Cluster whose node serving toolrouter's hash slot is killed: /ready false, writes until 503,
 *      /ready true again after the node is restarted;
 *   3. a 3-master + 3-replica Cluster whose slot master is killed (a failover): the worker's SIGTERM-to-exit time.
 * Prints a markdown table for BENCHMARKS.md "Operations under faults". The target is ≤ 2 s for every write refusal.
 *   node --import tsx bench/redis-faults.ts [writes]      (default 10 writes per outage)
 */
import { eventually, WorkerProcess, writeConfig } from '../test/helpers/processes.js';
import { PrivateRedis } from '../test/helpers/redis-server.js';
import { RedisClusterFixture } from '../test/helpers/redis-topologies.js';
import { startRouter, type RunningRouter } from '../test/helpers/router.js';
import { syntheticTools } from '../test/helpers/synthetic.js';

const writes = Number(process.argv[2] ?? 10);
const rows: string[][] = [];

function summary(label: string, samples: number[], statuses: number[]): void {
  const sorted = [...samples].sort((a, b) => a - b);
  const p50 = sorted[Math.floor(sorted.length / 2)]!;
  const max = sorted.at(-1)!;
  const refused = statuses.filter((status) => status === 503).length;
  rows.push([label, String(samples.length), `${refused}/${statuses.length}`, `${Math.round(p50)} ms`, `${Math.round(max)} ms`, max <= 2_000 ? 'yes' : 'NO']);
}

/** `writes` catalog PUTs and key generations (alternating) while Redis is away: how long each takes to answer. */
async function writesDuringOutage(api: RunningRouter): Promise<{ ms: number[]; statuses: number[] }> {
  const ms: number[] = [];
  const statuses: number[] = [];
  for (let i = 0; i < writes; i++) {
    const started = performance.now();
    const reply = i % 2 === 0 ? await api.request('PUT', `/v1/catalog/sources/outage${i}`, { tools: syntheticTools(2, `outage${i}`) }) : await api.request('POST', '/key/generate', {});
    ms.push(performance.now() - started);
    statuses.push(reply.status);
  }
  return { ms, statuses };
}

async function timeUntil(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<number> {
  const started = performance.now();
  await eventually(check, (ok) => ok, timeoutMs);
  return performance.now() - started;
}

const readyIs = (api: RunningRouter, status: number) => async () => (await api.request('GET', '/ready')).status === status;

/**
 * One worker and one API on `settings`, with a small catalog indexed and /ready 200, handed to `fault`; both are stopped
 * afterwards whatever happens (the Redis itself is the caller's to stop).
 */
async function withDeployment(settings: Record<string, unknown>, fault: (api: RunningRouter, worker: WorkerProcess) => Promise<void>): Promise<void> {
  const worker = new WorkerProcess(writeConfig({ ...settings, logLevel: 'info' }));
  try {
    await worker.ready();
    const api = await startRouter(settings);
    try {
      await api.request('PUT', '/v1/catalog/sources/base', { tools: syntheticTools(20, 'base') });
      await timeUntil(readyIs(api, 200));
      await fault(api, worker);
    } finally {
      await api.close();
    }
  } finally {
    await worker.kill('SIGKILL');
  }
}

async function singleRedis(): Promise<void> {
  const redis = new PrivateRedis();
  await redis.start();
  try {
    await withDeployment({ redis: { url: redis.url }, queue: { prefix: 'bench-faults' } }, async (api) => {
      await redis.stop();
      const notReadyAfter = await timeUntil(readyIs(api, 503));
      rows.push(['single Redis killed: /ready 503 after the kill', '1', '-', `${Math.round(notReadyAfter)} ms`, '-', '-']);
      const { ms, statuses } = await writesDuringOutage(api);
      summary('single Redis killed: writes until 503', ms, statuses);
    });
  } finally {
    await redis.stop();
  }
}

async function clusterSlotDown(): Promise<void> {
  const cluster = new RedisClusterFixture();
  await cluster.start();
  const prefix = 'benchfaults';
  try {
    await withDeployment({ redis: { cluster: { nodes: cluster.urls.slice(0, 1) } }, queue: { prefix } }, async (api) => {
      const node = cluster.server(await cluster.masterOf(`{${prefix}}:keys`));
      await node.kill();
      const notReadyAfter = await timeUntil(readyIs(api, 503));
      rows.push(['cluster, slot master killed: /ready 503 after the kill', '1', '-', `${Math.round(notReadyAfter)} ms`, '-', '-']);
      const { ms, statuses } = await writesDuringOutage(api);
      summary('cluster, slot master killed: writes until 503', ms, statuses);
      await node.restart();
      const readyAgain = await timeUntil(readyIs(api, 200));
      rows.push(['cluster, slot master restarted: /ready 200 after the restart', '1', '-', `${Math.round(readyAgain)} ms`, '-', '-']);
    });
  } finally {
    await cluster.stop();
  }
}

async function workerAfterFailover(): Promise<void> {
  const cluster = new RedisClusterFixture({ replicas: true });
  await cluster.start();
  const prefix = 'benchfailover';
  try {
    await withDeployment({ redis: { cluster: { nodes: cluster.urls.slice(0, 1) } }, queue: { prefix } }, async (api, worker) => {
      const key = `{${prefix}}:keys`;
      const before = await cluster.masterOf(key);
      // As in the test: a replica takes over with what it has replicated, so it must hold the catalog first.
      await cluster.untilReplicated(before);
      await cluster.server(before).kill();
      await cluster.untilFailedOver(key, before);
      await timeUntil(readyIs(api, 200));
      const started = performance.now();
      const code = await worker.kill('SIGTERM');
      const ms = performance.now() - started;
      rows.push([`worker SIGTERM after a cluster failover (exit code ${code})`, '1', '-', `${Math.round(ms)} ms`, '-', '-']);
    });
  } finally {
    await cluster.stop();
  }
}

await singleRedis();
await clusterSlotDown();
await workerAfterFailover();
console.log(`\n| fault | samples | 503s | p50 | max | ≤ 2 s |\n|---|---|---|---|---|---|`);
for (const row of rows) console.log(`| ${row.join(' | ')} |`);
process.exit(0);
