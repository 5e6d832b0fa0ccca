import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PrivateRedis } from '../helpers/redis-server.js';
import { eventually, WorkerProcess, writeConfig } from '../helpers/processes.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

describe('Redis going away', () => {
  const redis = new PrivateRedis();
  const settings = () => ({ redisUrl: redis.url, queue: { prefix: 'outage', backoffMs: 100 } });
  let api: RunningRouter;
  let worker: WorkerProcess;
  const status = async () => (await api.request('GET', '/v1/index/status')).body;

  before(async () => {
    await redis.start();
    worker = new WorkerProcess(writeConfig({ ...settings(), logLevel: 'info' }));
    await worker.ready();
    api = await startRouter(settings());
    await api.request('PUT', '/v1/catalog/sources/before', { tools: syntheticTools(10, 'before') });
    await eventually(status, (s) => s.state === 'ready' && s.tools === 10);
  });

  after(async () => {
    await api?.close();
    await worker?.kill('SIGKILL');
    await redis.stop();
  });

  it('keeps answering searches, refuses catalog writes with 503 and changes nothing, then recovers', async () => {
    await redis.stop();

    const search = await api.post('/v1/tools/search', { query: 'before3' });
    assert.equal(search.status, 200);
    assert.ok(search.body.results.some((hit: { name: string }) => hit.name.startsWith('before_3_')));

    const hashBefore = (await api.request('GET', '/v1/catalog')).body.catalogHash;
    const put = await api.request('PUT', '/v1/catalog/sources/during', { tools: syntheticTools(2, 'during') });
    assert.equal(put.status, 503);
    assert.equal(put.body.error.code, 'redis_unavailable');
    assert.match(put.body.error.message, /nothing was changed/);
    assert.equal((await api.request('GET', '/v1/catalog')).body.catalogHash, hashBefore);

    await redis.start();
    // The worker and the API reconnect on their own; a write now goes through and gets indexed.
    const retried = await eventually(
      () => api.request('PUT', '/v1/catalog/sources/after', { tools: syntheticTools(2, 'after') }),
      (response) => response.status === 200,
    );
    const final = await eventually(status, (s) => s.state === 'ready' && s.indexedHash === retried.body.catalogHash);
    assert.equal(final.tools, 12);
  });
});
