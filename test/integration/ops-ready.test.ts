import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startWorker, type CliProcess } from '../helpers/ops-processes.js';
import { PrivateRedis } from '../helpers/redis-server.js';
import { eventually, writeConfig } from '../helpers/processes.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

describe('GET /ready with Redis', () => {
  const redis = new PrivateRedis();
  const settings = () => ({ redisUrl: redis.url, queue: { prefix: 'ops-ready', backoffMs: 100 } });
  let api: RunningRouter;
  let worker: CliProcess | undefined;
  const ready = () => api.request('GET', '/ready');

  before(async () => {
    await redis.start();
    api = await startRouter(settings());
  });
  after(async () => {
    await api?.close();
    await worker?.stop();
    await redis.stop();
  });

  it('is 503 until the first index is loaded, naming the index check', async () => {
    // No worker yet: the catalog is queued for indexing but nothing builds it.
    await api.request('PUT', '/v1/catalog/sources/ready', { tools: syntheticTools(5, 'ready') });
    const response = await ready();
    assert.equal(response.status, 503);
    assert.equal(response.body.ready, false);
    assert.deepEqual(response.body.failing, ['index']);
    assert.match(response.body.checks.index.detail, /no index loaded yet/);
    assert.deepEqual(response.body.checks.redis, { ok: true });
    assert.equal((await api.request('GET', '/health')).status, 200);
  });

  it('is 200 once a worker has built the index', async () => {
    worker = (await startWorker(writeConfig(settings()))).process;
    const response = await eventually(ready, (r) => r.status === 200);
    assert.deepEqual(response.body.failing, []);
    assert.deepEqual(response.body.checks, { index: { ok: true }, redis: { ok: true } });
  });

  it('is 503 while Redis is down, naming the Redis check, and 200 again when it is back', async () => {
    await redis.stop();
    const down = await eventually(ready, (r) => r.status === 503);
    assert.deepEqual(down.body.failing, ['redis']);
    assert.equal(down.body.checks.index.ok, true, 'the loaded index still serves searches');
    assert.match(down.body.checks.redis.detail, /Redis/);
    assert.equal((await api.request('GET', '/health')).status, 200, 'the process is up all along');
    assert.equal((await api.post('/v1/tools/search', { query: 'ready3' })).status, 200);

    await redis.start();
    const back = await eventually(ready, (r) => r.status === 200, 30_000);
    assert.deepEqual(back.body.checks, { index: { ok: true }, redis: { ok: true } });
  });
});

describe('GET /ready without Redis', () => {
  let api: RunningRouter;
  before(async () => {
    api = await startRouter();
  });
  after(() => api.close());

  it('checks only the index', async () => {
    await api.request('PUT', '/v1/catalog/sources/local', { tools: syntheticTools(3, 'local') });
    await api.indexed();
    const response = await api.request('GET', '/ready');
    assert.equal(response.status, 200);
    assert.deepEqual(response.body, { ready: true, index: 'ready', checks: { index: { ok: true } }, failing: [] });
  });
});
