import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisKeys } from '../../src/redis/connection.js';
import { eventually, REDIS_URL, WorkerProcess, writeConfig } from '../helpers/processes.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/**
 * The shared index pipeline, end to end: real Redis, real BullMQ worker processes, real API instances.
 * Each run uses its own key prefix, so it neither sees nor disturbs anything else in the Redis.
 */
describe('Redis + BullMQ index pipeline', () => {
  const prefix = `trtest-${randomUUID().slice(0, 8)}`;
  const keys = new RedisKeys(prefix);
  const settings = {
    redisUrl: REDIS_URL,
    // Short locks so a killed worker's job is taken over in seconds, not the production minute.
    queue: { prefix, attempts: 3, backoffMs: 200, lockDurationMs: 3_000, stalledIntervalMs: 1_000 },
  };
  const configFile = writeConfig({ ...settings, logLevel: 'info' });
  const redis = new Redis(REDIS_URL);
  const routers: RunningRouter[] = [];
  let worker: WorkerProcess;
  let api: RunningRouter;

  const startApi = async () => {
    const router = await startRouter(settings);
    routers.push(router);
    return router;
  };
  const status = async (router: RunningRouter) => (await router.request('GET', '/v1/index/status')).body;
  const ready = (router: RunningRouter) =>
    eventually(() => status(router), (s) => s.state === 'ready' && s.indexedHash === s.catalogHash);
  const search = async (router: RunningRouter, query: string, mode = 'bm25') =>
    (await router.post('/v1/tools/search', { query, mode, top_k: 5 })).body.results.map((hit: { name: string }) => hit.name);

  before(async () => {
    worker = new WorkerProcess(configFile);
    await worker.ready();
    api = await startApi();
    await ready(api);
  });

  after(async () => {
    for (const router of routers) await router.close().catch(() => {});
    await worker?.kill('SIGTERM');
    const leftovers = await redis.keys(`${prefix}*`);
    const queueKeys = await redis.keys(`bull:${keys.indexQueue}:*`);
    if (leftovers.length + queueKeys.length > 0) await redis.del(...leftovers, ...queueKeys);
    redis.disconnect();
  });

  it('a catalog change triggers exactly one rebuild and the new tool becomes searchable', async () => {
    const buildsBefore = worker.builds().length;
    const put = await api.request('PUT', '/v1/catalog/sources/alpha', { tools: syntheticTools(20, 'alpha') });
    assert.equal(put.status, 200);
    const final = await ready(api);
    assert.equal(final.catalogHash, put.body.catalogHash);
    assert.ok((await search(api, 'alpha7')).includes('alpha_7_import_invoice'));
    // The same tools again are no change at all.
    await api.request('PUT', '/v1/catalog/sources/alpha', { tools: syntheticTools(20, 'alpha') });
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(worker.builds().length - buildsBefore, 1);
  });

  it('a second API instance loads the same artifact and follows catalog changes made on the first', async () => {
    const second = await startApi();
    const firstStatus = await status(api);
    const secondStatus = await ready(second);
    assert.equal(secondStatus.indexedHash, firstStatus.indexedHash);
    assert.deepEqual(await search(second, 'alpha7'), await search(api, 'alpha7'));

    const buildsBefore = worker.builds().length;
    await api.request('PUT', '/v1/catalog/sources/beta', { tools: syntheticTools(5, 'beta') });
    const firstReady = await ready(api);
    const secondReady = await eventually(() => status(second), (s) => s.indexedHash === firstReady.indexedHash && s.state === 'ready');
    assert.equal(secondReady.catalogHash, firstReady.catalogHash, 'the second instance has the static source too');
    assert.ok((await search(second, 'beta3')).includes('beta_3_update_invoice'));
    // The swap can reach the APIs before the worker's log line reaches this process: wait for the line, then count.
    await worker.buildOf(firstReady.indexedHash);
    assert.equal(worker.builds().length - buildsBefore, 1, 'two instances asking for one catalog share one build');
  });

  it('an API restarted while Redis holds the current artifact serves at once without rebuilding', async () => {
    const before = await status(api);
    const buildsBefore = worker.builds().length;
    const restarted = await startApi();
    const now = await status(restarted);
    assert.equal(now.state, 'ready');
    assert.equal(now.indexedHash, before.indexedHash);
    assert.ok((await search(restarted, 'alpha7')).includes('alpha_7_import_invoice'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(worker.builds().length, buildsBefore);
  });

  it('changing one tool of 1,000 re-embeds exactly one text', async () => {
    const tools = syntheticTools(1000, 'bulk');
    await api.request('PUT', '/v1/catalog/sources/bulk', { tools });
    // Each build is found by its catalog hash, not as the last line seen: the swap can overtake the worker's log line.
    const first = await worker.buildOf((await ready(api)).indexedHash);
    assert.ok(Number(first.embedded) >= 1000, `first build embedded ${first.embedded}`);
    const buildsBefore = worker.builds().length;
    tools[500] = { ...tools[500]!, description: 'Send a carrier pigeon with the quarterly numbers.' };
    await api.request('PUT', '/v1/catalog/sources/bulk', { tools });
    const second = await worker.buildOf((await ready(api)).indexedHash);
    assert.equal(worker.builds().length, buildsBefore + 1);
    assert.equal(second.embedded, 1);
    assert.ok((await search(api, 'carrier pigeon')).includes(tools[500]!.name));
  });

  it('searches never fail while a rebuild runs', async () => {
    const put = api.request('PUT', '/v1/catalog/sources/big', { tools: syntheticTools(3000, 'big') });
    const outcomes: number[] = [];
    let building = true;
    const done = (async () => {
      await put;
      await ready(api);
      building = false;
    })();
    while (building) {
      const batch = await Promise.all(
        ['invoice', 'archive a ticket', 'sync playlist'].map((query) => api.post('/v1/tools/search', { query })),
      );
      outcomes.push(...batch.map((response) => response.status));
    }
    await done;
    assert.ok(outcomes.length > 10, `only ${outcomes.length} searches ran during the build`);
    assert.deepEqual([...new Set(outcomes)], [200]);
    assert.ok((await search(api, 'big2999')).some((name: string) => name.startsWith('big_2999_')));
  });

  it('a worker killed mid-build is replaced and the build completes', async () => {
    const startedBefore = worker.logs.filter((line) => line.msg === 'index build started').length;
    const put = await api.request('PUT', '/v1/catalog/sources/crash', { tools: syntheticTools(4000, 'crash') });
    assert.equal(put.status, 200);
    await worker.waitFor(
      () => worker.logs.filter((line) => line.msg === 'index build started').length > startedBefore,
    );
    await worker.kill('SIGKILL');
    assert.notEqual((await status(api)).indexedHash, put.body.catalogHash, 'the build finished before the kill');

    worker = new WorkerProcess(configFile);
    await worker.ready();
    const final = await ready(api);
    assert.equal(final.indexedHash, put.body.catalogHash);
    assert.ok((await search(api, 'crash3999')).some((name: string) => name.startsWith('crash_3999_')));
  });

  it('a newer catalog supersedes builds still queued for older ones', async () => {
    await worker.kill('SIGTERM');
    const older = await api.request('PUT', '/v1/catalog/sources/versions', { tools: syntheticTools(3, 'first') });
    const newer = await api.request('PUT', '/v1/catalog/sources/versions', { tools: syntheticTools(3, 'second') });
    assert.notEqual(older.body.catalogHash, newer.body.catalogHash);
    worker = new WorkerProcess(configFile);
    await worker.ready();
    const final = await ready(api);
    assert.equal(final.indexedHash, newer.body.catalogHash);
    const finished = worker.logs.filter((line) => line.msg === 'index build finished');
    const outcomes = (hash: string) => finished.filter((line) => String(line.jobId).includes(hash)).map((line) => line.outcome);
    assert.deepEqual(outcomes(older.body.catalogHash), ['superseded'], 'the stale job is skipped, not built');
    // Built once. Another job for it only reuses that artifact: another instance re-announcing the catalog, or the job
    // run again after its 3 s lock lapsed on a loaded machine (seen before the Redis bus too, on the base commit).
    const newerOutcomes = outcomes(newer.body.catalogHash);
    assert.equal(newerOutcomes[0], 'built');
    assert.deepEqual(newerOutcomes.slice(1).filter((outcome) => outcome !== 'reused'), []);
    assert.equal(finished.filter((line) => line.outcome === 'built').length, 1, 'nothing else was built');
    await api.request('DELETE', '/v1/catalog/sources/versions');
    await ready(api);
  });

  it('a build that keeps failing leaves the last good index serving and shows the error', async () => {
    // Only one API instance from here on: the others would publish the snapshot again (as they should).
    for (const other of routers.filter((router) => router !== api)) await other.close();
    const good = await status(api);
    // Stop the worker, queue a build, and remove the snapshot it needs: every attempt must fail.
    await worker.kill('SIGTERM');
    const put = await api.request('PUT', '/v1/catalog/sources/doomed', { tools: syntheticTools(3, 'doomed') });
    await eventually(() => redis.exists(keys.catalogSnapshot(put.body.catalogHash)), (exists) => exists === 1);
    await redis.del(keys.catalogSnapshot(put.body.catalogHash));
    worker = new WorkerProcess(configFile);
    await worker.ready();

    const failed = await eventually(() => status(api), (s) => s.state === 'failed');
    assert.match(failed.lastError, /snapshot .* is not in Redis/);
    assert.equal(failed.indexedHash, good.indexedHash, 'the last good index is still live');
    const attempts = worker.logs.filter((line) => line.msg === 'index build failed');
    assert.equal(attempts.length, 3, 'retried with backoff up to the configured attempts');
    assert.ok((await search(api, 'alpha7')).includes('alpha_7_import_invoice'), 'searches still answered');

    // Removing the broken source brings back a catalog whose index exists: no build needed.
    await api.request('DELETE', '/v1/catalog/sources/doomed');
    const recovered = await ready(api);
    assert.equal(recovered.indexedHash, good.indexedHash);
  });
});
