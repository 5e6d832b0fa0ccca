import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { deploy, type Deployment } from '../helpers/deployment.js';
import { eventually, WorkerProcess } from '../helpers/processes.js';
import { RedisClusterFixture, RedisSentinelFixture } from '../helpers/redis-topologies.js';
import type { RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/**
 * Faults an operator meets, on Redis as production runs it (issue 43): the node serving toolrouter's hash slot dies
 * (with no replica, and with one that takes over), a node leaves the cluster, Sentinel's master dies; Cluster and
 * Sentinel over TLS. Through each, /ready is polled, writes must answer 503 fast (nothing half-written), acknowledged
 * writes must survive, and a worker must stop promptly on SIGTERM. Times are asserted as generous bounds only; the
 * "≤ 2 s" figures come from bench/redis-faults.ts.
 */

const admin = (api: RunningRouter, method: string, route: string, body?: unknown) => call(api.url, method, route, { key: ADMIN_KEY, body });
const ready = (api: RunningRouter) => call(api.url, 'GET', '/ready');
const status = async (api: RunningRouter) => (await admin(api, 'GET', '/v1/index/status')).body;

/** PUTs a source and waits until the worker's index of it is served; returns the catalog hash. */
async function putAndIndex(deployment: Deployment, source: string, count: number): Promise<string> {
  const put = await admin(deployment.api, 'PUT', `/v1/catalog/sources/${source}`, { tools: syntheticTools(count, source) });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  await eventually(() => status(deployment.api), (s) => s.state === 'ready' && s.indexedHash === put.body.catalogHash).catch((error: Error) => {
    throw new Error(`${error.message}; worker's last lines: ${JSON.stringify(deployment.worker.logs.slice(-6))}`);
  });
  assert.equal((await deployment.worker.buildOf(put.body.catalogHash)).outcome, 'built');
  return put.body.catalogHash as string;
}

/** A write during an outage: 503 with Retry-After, the time it took, and proof nothing changed. */
async function refusedWrite(api: RunningRouter, source: string): Promise<number> {
  const catalogBefore = (await admin(api, 'GET', '/v1/catalog')).body.catalogHash;
  const started = performance.now();
  const put = await admin(api, 'PUT', `/v1/catalog/sources/${source}`, { tools: syntheticTools(2, source) });
  const elapsed = performance.now() - started;
  assert.equal(put.status, 503, JSON.stringify(put.body));
  assert.equal(put.body.error.code, 'redis_unavailable');
  assert.ok(Number(put.headers.get('retry-after')) >= 1, `Retry-After: ${put.headers.get('retry-after')}`);
  assert.equal((await admin(api, 'GET', '/v1/catalog')).body.catalogHash, catalogBefore, 'the catalog did not change');
  return elapsed;
}

/** SIGTERM to a worker holding no job: it exits 0, well before its 5-minute shutdown timeout. */
async function stopsPromptly(worker: WorkerProcess): Promise<number> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([
    worker.kill('SIGTERM'),
    new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still running after 30 s'), 30_000))),
  ]);
  clearTimeout(timer);
  if (typeof code === 'string') await worker.kill('SIGKILL');
  const elapsed = performance.now() - started;
  assert.equal(code, 0, `exit code ${code}; last lines: ${JSON.stringify(worker.logs.slice(-3))}`);
  assert.ok(!worker.logs.some((line) => line.msg === 'index worker shutdown timed out; exiting with the job unfinished'));
  // Generous: the point is "seconds, not the 300 s timeout" (a fresh worker takes about 0.2 s).
  assert.ok(elapsed < 15_000, `stopped after ${Math.round(elapsed)} ms`);
  return elapsed;
}

describe('Redis Cluster (3 masters, no replicas): the node serving toolrouter\'s slot dies and comes back', () => {
  const cluster = new RedisClusterFixture();
  const prefix = 'trfaults';
  let deployment: Deployment | undefined;

  before(async () => {
    await cluster.start();
    deployment = await deploy({ cluster: { nodes: cluster.urls.slice(0, 1) } }, prefix);
  });
  after(async () => {
    await deployment?.close();
    await cluster.stop();
  });

  it('/ready turns false while the slot is unserved, writes answer 503 fast and change nothing, both recover', async () => {
    const { api } = deployment!;
    const hash = await putAndIndex(deployment!, 'alpha', 20);
    const key = await generateKey(api.url, {});
    assert.equal((await ready(api)).status, 200);
    // A second worker, to be stopped while the slot is unserved (the first builds again after the recovery).
    const spare = new WorkerProcess(deployment!.worker.configFile);
    await spare.ready();

    const slotNode = await cluster.masterOf(`{${prefix}}:keys`);
    // Another master stays up: a PING to the cluster still answers, only toolrouter's slot is gone.
    await cluster.server(slotNode).kill();
    const down = await eventually(() => ready(api), (reply) => reply.status === 503, 10_000);
    assert.deepEqual(down.body.failing, ['redis']);
    assert.match(down.body.checks.redis.detail, /slot/);

    // Writes are refused at once now that the probe has seen the slot go (a catalog PUT and a key).
    const elapsed = await refusedWrite(api, 'during');
    assert.ok(elapsed < 5_000, `refused after ${Math.round(elapsed)} ms`);
    const keyWrite = await admin(api, 'POST', '/key/generate', {});
    assert.equal(keyWrite.status, 503);
    // Searches go on from the loaded index.
    assert.equal((await admin(api, 'POST', '/v1/tools/search', { query: 'alpha3', mode: 'bm25' })).status, 200);
    // A worker holding no job stops in seconds on SIGTERM even while its queue's slot is unserved.
    await stopsPromptly(spare);

    await cluster.server(slotNode).restart();
    // Recovered: ready, and no longer degraded (a node still loading its data answers, but serves nothing yet).
    await eventually(() => ready(api), (reply) => reply.status === 200 && reply.body.degraded === undefined, 30_000);
    // What was acknowledged before the outage is there; what was refused is not.
    assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: key.key })).status, 200);
    const catalog = (await admin(api, 'GET', '/v1/catalog')).body;
    assert.equal(catalog.catalogHash, hash);
    assert.deepEqual(catalog.sources, ['alpha'], 'the refused source is nowhere');
    await putAndIndex(deployment!, 'after', 5);
  });
});

describe('Redis Cluster over TLS with replicas: a failover, a worker stopped after it, a node leaving', () => {
  const cluster = new RedisClusterFixture({ replicas: true, tls: true });
  const prefix = 'trfailover';
  let deployment: Deployment | undefined;

  before(async () => {
    await cluster.start();
    deployment = await deploy({ cluster: { nodes: cluster.urls.slice(0, 1) }, tls: cluster.tlsSettings }, prefix);
  });
  after(async () => {
    await deployment?.close();
    await cluster.stop();
  });

  it('keeps acknowledged writes through the failover; /ready is true on the promoted replica; the worker stops in seconds', async () => {
    const { api } = deployment!;
    const hash = await putAndIndex(deployment!, 'alpha', 20);
    const key = await generateKey(api.url, {});

    const slotKey = `{${prefix}}:keys`;
    const oldMaster = await cluster.masterOf(slotKey);
    // Replication is asynchronous: "acknowledged writes survive a failover" holds for what the replica has.
    await cluster.untilReplicated(oldMaster);
    await cluster.server(oldMaster).kill();
    const newMaster = await cluster.untilFailedOver(slotKey, oldMaster);
    assert.notEqual(newMaster, oldMaster);
    await eventually(() => ready(api), (reply) => reply.status === 200, 30_000);
    assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: key.key })).status, 200, 'the key made before the failover works');
    assert.equal((await admin(api, 'GET', '/v1/catalog')).body.catalogHash, hash);
    // The worker lived through the failover: it still builds, and then stops at once on SIGTERM.
    await putAndIndex(deployment!, 'beta', 5);
    await stopsPromptly(deployment!.worker);
  });

  it('a node leaving the cluster (the old master, back as a replica, removed) changes nothing for toolrouter', async () => {
    const { api } = deployment!;
    const replicas = [];
    for (const server of cluster.servers) {
      if (server.running) continue;
      await server.restart();
      replicas.push(server.port);
    }
    await cluster.untilHealthy(6);
    for (const port of replicas) await cluster.remove(port);
    await cluster.untilHealthy(6 - replicas.length);
    await eventually(() => ready(api), (reply) => reply.status === 200, 30_000);
    const put = await admin(api, 'PUT', '/v1/catalog/sources/gamma', { tools: syntheticTools(3, 'gamma') });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal((await generateKey(api.url, {})).key.length > 0, true);
  });
});

describe('Redis behind Sentinel over TLS: the master dies', () => {
  const sentinel = new RedisSentinelFixture({ tls: true });
  let deployment: Deployment | undefined;

  before(async () => {
    await sentinel.start();
    deployment = await deploy({ sentinel: { sentinels: sentinel.addresses, name: sentinel.name }, tls: sentinel.tlsSettings }, 'trsentinelfaults');
  });
  after(async () => {
    await deployment?.close();
    await sentinel.stop();
  });

  it('/ready follows the master: false while none, true on the promoted replica; writes survive; the worker stops in seconds', async () => {
    const { api } = deployment!;
    const hash = await putAndIndex(deployment!, 'alpha', 20);
    const key = await generateKey(api.url, {});
    assert.equal((await ready(api)).status, 200);

    const oldMaster = await sentinel.masterPort();
    await sentinel.server(oldMaster).kill();
    // Sentinel needs down-after-milliseconds (1 s) and an election: until then there is no master to write to.
    const down = await eventually(() => ready(api), (reply) => reply.status === 503, 10_000);
    assert.deepEqual(down.body.failing, ['redis']);
    await sentinel.untilMasterMoved(oldMaster);
    await eventually(() => ready(api), (reply) => reply.status === 200, 30_000);
    assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: key.key })).status, 200, 'the key made before the failover works');
    assert.equal((await admin(api, 'GET', '/v1/catalog')).body.catalogHash, hash);
    await putAndIndex(deployment!, 'beta', 5);
    await stopsPromptly(deployment!.worker);
  });
});
