import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sample, startServe, startWorker, type CliProcess } from '../helpers/ops-processes.js';
import { eventually, REDIS_URL, writeConfig } from '../helpers/processes.js';
import { syntheticTools } from '../helpers/synthetic.js';

/**
 * The docker-compose shape without Docker: two API processes and one worker (`toolrouter serve|worker`, one
 * config file) on one Redis, under a queue prefix of this run's own.
 */
describe('deployed shape: API ×2 + worker + Redis, as processes', () => {
  const prefix = `ops-deploy-${process.pid}-${Date.now()}`;
  const config = writeConfig({ port: 0, host: '127.0.0.1', redisUrl: REDIS_URL, queue: { prefix } });
  const processes: CliProcess[] = [];
  let api1: string;
  let api2: string;
  let workerMetrics: string;

  const json = async (method: string, url: string, body?: unknown) => {
    const response = await fetch(url, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  const scrape = async () => (await fetch(workerMetrics)).text();

  before(async () => {
    const [first, second, worker] = await Promise.all([startServe(config), startServe(config), startWorker(config)]);
    processes.push(first.process, second.process, worker.process);
    api1 = first.url;
    api2 = second.url;
    workerMetrics = worker.metricsUrl;
  });
  after(async () => {
    await Promise.all(processes.map((child) => child.stop()));
  });

  it('indexes a catalog PUT on one API and serves it from the other', async () => {
    const put = await json('PUT', `${api1}/v1/catalog/sources/shared`, { tools: syntheticTools(40, 'shared') });
    assert.equal(put.status, 200);
    const hash = put.body.catalogHash as string;
    for (const api of [api1, api2]) {
      await eventually(() => json('GET', `${api}/v1/index/status`), (s) => s.body.indexedHash === hash && s.body.state === 'ready');
    }
    const search = await json('POST', `${api2}/v1/tools/search`, { query: 'shared17', top_k: 3 });
    assert.equal(search.status, 200);
    assert.equal(search.body.index.hash, hash);
    assert.match(search.body.results[0].name, /^shared_17_/);
    for (const api of [api1, api2]) {
      const ready = await json('GET', `${api}/ready`);
      assert.equal(ready.status, 200, JSON.stringify(ready.body));
      assert.deepEqual(ready.body.checks, { index: { ok: true }, redis: { ok: true } });
    }
  });

  it('shows the build on the worker\'s /metrics, and the shared embedding cache at work on the next one', async () => {
    const first = await scrape();
    assert.ok((sample(first, 'toolrouter_index_builds_total', { outcome: 'built' }) ?? 0) >= 1, first);
    assert.ok((sample(first, 'toolrouter_index_build_duration_seconds_count') ?? 0) >= 1);
    assert.ok((sample(first, 'toolrouter_index_embedded_texts_total', { cache: 'miss' }) ?? 0) >= 40);
    assert.ok((sample(first, 'toolrouter_index_artifact_bytes') ?? 0) > 0);
    const hitsBefore = sample(first, 'toolrouter_index_embedded_texts_total', { cache: 'hit' }) ?? 0;
    const missesBefore = sample(first, 'toolrouter_index_embedded_texts_total', { cache: 'miss' }) ?? 0;

    // Through the other API this time: 40 known tools (cache hits) and 5 new ones.
    const put = await json('PUT', `${api2}/v1/catalog/sources/more`, { tools: syntheticTools(5, 'more') });
    await eventually(() => json('GET', `${api1}/v1/index/status`), (s) => s.body.indexedHash === put.body.catalogHash);
    const second = await scrape();
    assert.equal((sample(second, 'toolrouter_index_embedded_texts_total', { cache: 'hit' }) ?? 0) - hitsBefore, 40);
    assert.equal((sample(second, 'toolrouter_index_embedded_texts_total', { cache: 'miss' }) ?? 0) - missesBefore, 5);
    assert.ok((sample(second, 'toolrouter_process_resident_memory_bytes') ?? 0) > 0, 'process metrics too');
  });
});
