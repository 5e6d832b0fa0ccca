import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { type Balancer, startRoundRobin, untilInRotation } from '../helpers/balancer.js';
import { startWorker, type CliProcess } from '../helpers/ops-processes.js';
import { eventually, writeConfig } from '../helpers/processes.js';
import { PrivateRedis } from '../helpers/redis-server.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/**
 * Issue 56: /ready says whether *this* instance can serve. A Redis stall (CLIENT PAUSE) or a full Redis (maxmemory)
 * is the same for every instance; taking them all out would leave the balancer nothing. On a test-owned Redis, three
 * instances behind a round-robin HAProxy that checks /ready and takes a server out after one failed check.
 */
describe('/ready through a Redis stall and a full Redis', { timeout: 600_000 }, () => {
  const redis = new PrivateRedis();
  const settings = () => ({ redisUrl: redis.url, queue: { prefix: 'ops-ready-shared', backoffMs: 100 } });
  let worker: CliProcess | undefined;
  let apis: RunningRouter[] = [];
  let balancer: Balancer;
  let admin: Redis;

  before(async () => {
    await redis.start();
    admin = new Redis(redis.url);
    worker = (await startWorker(writeConfig(settings()))).process;
    apis = [await startRouter(settings()), await startRouter(settings())];
    apis.push(await startRouter(settings()));
    await apis[0]!.request('PUT', '/v1/catalog/sources/shared', { tools: syntheticTools(20, 'shared') });
    for (const api of apis) await eventually(() => api.request('GET', '/ready'), (r) => r.status === 200, 120_000);
    balancer = await startRoundRobin(
      apis.map((api) => ({ host: '127.0.0.1', port: Number(new URL(api.url).port) })),
      { checkIntervalMs: 500, checkPath: '/ready', fall: 1, rise: 1 },
    );
    await untilInRotation(balancer, 60_000);
  });
  after(async () => {
    await balancer?.stop();
    for (const api of apis) await api.close();
    await worker?.stop();
    admin?.disconnect();
    await redis.stop();
  });

  it('a 3 s CLIENT PAUSE under load leaves the instances ready and HAProxy answers no 503', async () => {
    const statuses = new Map<number, number>();
    let readyLow = apis.length;
    let running = true;
    const load = Array.from({ length: 6 }, async (_, n) => {
      for (let i = 0; running; i++) {
        const status = await fetch(`${balancer.url}/v1/tools/search`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: `shared tool ${n} ${i % 7}` }),
        }).then(async (response) => (await response.arrayBuffer(), response.status), () => 0);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    });
    const watch = (async () => {
      while (running) {
        const ready = await Promise.all(apis.map((api) => fetch(`${api.url}/ready`).then((response) => response.status === 200, () => false)));
        readyLow = Math.min(readyLow, ready.filter(Boolean).length);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await admin.call('CLIENT', 'PAUSE', '3000', 'ALL');
    // Through the pause, and as long again after it.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    running = false;
    await Promise.all([...load, watch]);
    const summary = JSON.stringify(Object.fromEntries(statuses));
    console.log(`CLIENT PAUSE 3 s through HAProxy: statuses ${summary}; fewest instances ready at once: ${readyLow} of ${apis.length}`);
    assert.ok(readyLow >= 1, `every instance was unready at once (${summary})`);
    assert.equal(statuses.get(503) ?? 0, 0, summary);
    assert.deepEqual([...statuses.keys()], [200], summary);
  });

  it('a full Redis (maxmemory) keeps /ready 200 with redis degraded: reads served, writes 503 with Retry-After', async () => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      const api = apis[1]!;
      const degraded = await eventually(() => api.request('GET', '/ready'), (r) => r.body.checks?.redis?.ok === false, 30_000);
      assert.equal(degraded.status, 200, JSON.stringify(degraded.body));
      assert.deepEqual(degraded.body.failing, []);
      assert.deepEqual(degraded.body.degraded, ['redis']);
      assert.match(degraded.body.checks.redis.detail, /out of memory/);
      assert.equal((await api.post('/v1/tools/search', { query: 'shared tool' })).status, 200);
      const put = await api.request('PUT', '/v1/catalog/sources/full', { tools: syntheticTools(2, 'full') });
      assert.equal(put.status, 503, JSON.stringify(put.body));
      assert.ok(Number(put.headers.get('retry-after')) >= 1);
      assert.doesNotMatch(JSON.stringify(put.body), /OOM|maxmemory/);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    await eventually(() => apis[1]!.request('GET', '/ready'), (r) => r.status === 200 && r.body.checks.redis.ok === true, 30_000);
  });
});
