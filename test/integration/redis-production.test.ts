import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { deploy, type Deployment } from '../helpers/deployment.js';
import { eventually } from '../helpers/processes.js';
import { RedisClusterFixture, RedisSentinelFixture, TlsRedisFixture } from '../helpers/redis-topologies.js';
import type { RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/**
 * The whole pipeline on Redis as production runs it: a 3-master Cluster, a master + replica behind Sentinel through a
 * failover, and a TLS-only Redis with a private CA. Each with two API instances and a real worker process: catalog
 * PUT, worker build, search on both instances, a key made on one and used on the other, a runtime change announced.
 */

/** Two API instances and a worker stopped gracefully at the end. */
const PRODUCTION = { apis: 2, stopWorker: 'SIGTERM' } as const;

const admin = (api: RunningRouter, method: string, route: string, body?: unknown) => call(api.url, method, route, { key: ADMIN_KEY, body });
const status = async (api: RunningRouter) => (await admin(api, 'GET', '/v1/index/status')).body;
const search = async (api: RunningRouter, query: string) => {
  const reply = await admin(api, 'POST', '/v1/tools/search', { query, mode: 'bm25', top_k: 5 });
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return reply.body.results.map((hit: { name: string }) => hit.name) as string[];
};

/** Both instances serve the index of `catalogHash`, built by the worker. */
async function servedEverywhere(apis: RunningRouter[], catalogHash: string): Promise<void> {
  for (const api of apis) {
    await eventually(() => status(api), (s) => s.state === 'ready' && s.indexedHash === catalogHash && s.catalogHash === catalogHash);
  }
}

/**
 * The checks every form must pass. Returns what was written (and acknowledged), so a failover test can look for it.
 */
async function exercise(deployment: Deployment, source: string, weight: number): Promise<{ key: string; catalogHash: string }> {
  const [first, second] = deployment.apis as [RunningRouter, RunningRouter];
  const put = await admin(first, 'PUT', `/v1/catalog/sources/${source}`, { tools: syntheticTools(30, source) });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  await servedEverywhere([first, second], put.body.catalogHash);
  assert.equal((await deployment.worker.buildOf(put.body.catalogHash)).outcome, 'built', 'the worker built it');
  const found = await search(second, `${source}7`);
  assert.ok(found.some((name) => name.startsWith(`${source}_7_`)), `${source}_7_* found on the second instance: ${found.join(', ')}`);
  assert.deepEqual(await search(first, `${source}7`), found, 'both instances answer from the same index');

  const made = await generateKey(first.url, {});
  assert.equal((await call(second.url, 'GET', '/v1/catalog', { key: made.key })).status, 200, 'a key made on one instance works on the other');

  const applied = await admin(first, 'PUT', '/v1/search/settings', { weights: { bm25: weight, vector: 1 - weight } });
  assert.equal(applied.status, 200, JSON.stringify(applied.body));
  await eventually(() => admin(second, 'GET', '/v1/search/settings'), (reply) => reply.body.weights?.bm25 === weight, 20_000);
  return { key: made.key, catalogHash: put.body.catalogHash };
}

describe('Redis Cluster (3 masters)', () => {
  const cluster = new RedisClusterFixture();
  const prefix = 'trcluster';
  let deployment: Deployment | undefined;

  before(async () => {
    await cluster.start();
    deployment = await deploy({ cluster: { nodes: cluster.urls.slice(0, 1) } }, prefix, PRODUCTION);
  });

  after(async () => {
    await deployment?.close();
    await cluster.stop();
  });

  it('runs the pipeline: build, search on both instances, keys and settings shared', async () => {
    await exercise(deployment!, 'alpha', 0.3);
  });

  it('the embedding cache works across the cluster: changing one tool of 200 embeds one text', async () => {
    const [first] = deployment!.apis as [RunningRouter];
    const tools = syntheticTools(200, 'cached');
    const put = await admin(first, 'PUT', '/v1/catalog/sources/cached', { tools });
    await servedEverywhere(deployment!.apis, put.body.catalogHash);
    assert.ok(Number((await deployment!.worker.buildOf(put.body.catalogHash)).embedded) >= 200);
    tools[100] = { ...tools[100]!, description: 'Send a carrier pigeon with the quarterly numbers.' };
    const changed = await admin(first, 'PUT', '/v1/catalog/sources/cached', { tools });
    await servedEverywhere(deployment!.apis, changed.body.catalogHash);
    assert.equal((await deployment!.worker.buildOf(changed.body.catalogHash)).embedded, 1, 'the other 199 vectors came from the cache (MGET on the cluster)');
  });

  it('every key of the deployment (BullMQ included) is in one hash slot; the nodes hold nothing else of it', async () => {
    const slots = new Map<number, string[]>();
    const holders = new Set<number>();
    for (const url of cluster.urls) {
      const node = new Redis(url);
      try {
        const names = [...(await node.keys(`{${prefix}}:*`)), ...(await node.keys(`bull:{${prefix}}:*`))];
        if (names.length > 0) holders.add(Number(new URL(url).port));
        for (const name of names) {
          const slot = Number(await node.cluster('KEYSLOT', name));
          slots.set(slot, [...(slots.get(slot) ?? []), name]);
        }
      } finally {
        node.disconnect();
      }
    }
    const all = [...slots.values()].flat();
    assert.ok(all.some((name) => name.endsWith(':keys')), `the API keys are there: ${all.slice(0, 5).join(', ')}`);
    assert.ok(all.some((name) => name.startsWith('bull:')), 'the queue is there');
    assert.ok(all.some((name) => name.includes(':emb:')), 'the embedding cache is there');
    assert.equal(slots.size, 1, `one slot: ${[...slots.keys()].join(', ')}`);
    assert.equal(holders.size, 1);
  });
});

describe('Redis behind Sentinel, through a failover', () => {
  const sentinel = new RedisSentinelFixture();
  let deployment: Deployment | undefined;

  before(async () => {
    await sentinel.start();
    deployment = await deploy({ sentinel: { sentinels: sentinel.addresses, name: sentinel.name } }, 'trsentinel', PRODUCTION);
  });

  after(async () => {
    await deployment?.close();
    await sentinel.stop();
  });

  it('keeps acknowledged writes and the pipeline working when the replica is promoted', async () => {
    const before = await exercise(deployment!, 'alpha', 0.3);
    const oldMaster = await sentinel.masterPort();
    await sentinel.failover();
    assert.notEqual(await sentinel.masterPort(), oldMaster);

    // Written before the failover, read after it from the promoted replica: by an instance that was there, and by one
    // started afterwards (it reads catalog, index, keys and settings from Redis only).
    const [, second] = deployment!.apis as [RunningRouter, RunningRouter];
    const late = await deployment!.start();
    for (const api of [...deployment!.apis, late]) {
      // As a load balancer would: writes go to an instance once /ready says its Redis master takes them (during the
      // switch they answer 503 within redis.commandTimeoutMs).
      await eventually(() => call(api.url, 'GET', '/ready'), (reply) => reply.status === 200, 30_000);
    }
    for (const api of [second, late]) {
      await eventually(() => call(api.url, 'GET', '/v1/catalog', { key: before.key }), (reply) => reply.status === 200, 20_000);
      await eventually(() => status(api), (s) => s.state === 'ready' && s.indexedHash === before.catalogHash);
      assert.equal((await admin(api, 'GET', '/v1/search/settings')).body.weights.bm25, 0.3);
    }
    assert.ok((await search(late, 'alpha7')).some((name) => name.startsWith('alpha_7_')));

    // After the failover the bus was renewed on the new master: changes are announced and built as before.
    await exercise({ ...deployment!, apis: [deployment!.apis[1]!, late] }, 'beta', 0.6);
    await eventually(() => admin(deployment!.apis[0]!, 'GET', '/v1/search/settings'), (reply) => reply.body.weights?.bm25 === 0.6, 20_000);
  });
});

describe('Redis over TLS with a private CA', () => {
  const tls = new TlsRedisFixture();
  let deployment: Deployment | undefined;

  before(async () => {
    await tls.start();
    deployment = await deploy({ url: tls.url, tls: { ca: tls.caFile, cert: tls.certFile, key: tls.keyFile, servername: tls.servername } }, 'trtls', PRODUCTION);
  });

  after(async () => {
    await deployment?.close();
    await tls.stop();
  });

  it('runs the pipeline over rediss:// with the CA, client certificate and servername from redis.tls', async () => {
    await exercise(deployment!, 'alpha', 0.3);
  });

  it('the server really checks: without the client certificate, or without the CA, no connection', async () => {
    const ca = readFileSync(tls.caFile);
    for (const options of [{ ca, servername: tls.servername }, { servername: tls.servername, cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) }]) {
      const client = new Redis(tls.url, { tls: options, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      client.on('error', () => {});
      await assert.rejects(client.connect().then(() => client.ping()));
      client.disconnect();
    }
  });
});
