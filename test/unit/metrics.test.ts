import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';

/** Reads one sample's value from Prometheus text output (0 when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return 0;
}

describe('GET /metrics', () => {
  let api: RunningRouter;
  const scrape = async () => {
    const response = await fetch(`${api.url}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /text\/plain/);
    return response.text();
  };

  before(async () => {
    api = await startRouter();
    await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
    await api.indexed();
  });
  after(() => api.close());

  it('counts searches by mode, their results and latency', async () => {
    const before = await scrape();
    await api.post('/v1/tools/search', { query: 'send an email', mode: 'bm25', top_k: 3 });
    await api.post('/v1/tools/search', { query: 'weather tomorrow' });
    const now = await scrape();
    const delta = (name: string, labels: Record<string, string>) => sample(now, name, labels) - sample(before, name, labels);
    assert.equal(delta('toolrouter_search_duration_seconds_count', { mode: 'bm25' }), 1);
    assert.equal(delta('toolrouter_search_duration_seconds_count', { mode: 'hybrid' }), 1);
    assert.equal(delta('toolrouter_search_results_sum', { mode: 'bm25' }), 3);
    assert.ok(delta('toolrouter_search_duration_seconds_sum', { mode: 'hybrid' }) > 0);
  });

  it('reports the live index and the builds that made it', async () => {
    const text = await scrape();
    assert.equal(sample(text, 'toolrouter_index_tools'), fixtureTools().length);
    assert.ok(sample(text, 'toolrouter_index_swaps_total') >= 1);
    assert.ok(sample(text, 'toolrouter_index_build_duration_seconds_count') >= 1);
    assert.ok(sample(text, 'toolrouter_index_embedded_texts_total', { cache: 'miss' }) >= fixtureTools().length);
  });

  it('counts HTTP requests by route pattern and status', async () => {
    const before = await scrape();
    await api.post('/v1/tools/search', { query: 42 });
    await api.request('DELETE', '/v1/catalog/sources/never-there');
    await api.request('GET', '/nope');
    const now = await scrape();
    const delta = (labels: Record<string, string>) =>
      sample(now, 'toolrouter_http_requests_total', labels) - sample(before, 'toolrouter_http_requests_total', labels);
    assert.equal(delta({ method: 'POST', route: '/v1/tools/search', status: '400' }), 1);
    assert.equal(delta({ method: 'DELETE', route: '/v1/catalog/sources/:source', status: '404' }), 1);
    assert.equal(delta({ method: 'GET', route: 'unmatched', status: '404' }), 1);
    assert.ok(sample(now, 'toolrouter_process_resident_memory_bytes') > 0, 'default process metrics are exported');
  });
});

describe('a metrics registry per router', () => {
  it('counts each router in its own registry, so two routers in one process do not see each other', async () => {
    const first = await startRouter();
    const second = await startRouter();
    try {
      await first.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
      await first.indexed();
      const scrape = async (api: RunningRouter) => (await fetch(`${api.url}/metrics`)).text();
      const searches = (text: string) => sample(text, 'toolrouter_search_duration_seconds_count', { mode: 'bm25' });
      await first.post('/v1/tools/search', { query: 'send an email', mode: 'bm25' });
      await first.post('/v1/tools/search', { query: 'weather tomorrow', mode: 'bm25' });
      assert.equal(searches(await scrape(first)), 2);
      assert.equal(searches(await scrape(second)), 0, "the second router's /metrics shows none of the first's searches");
      assert.equal(sample(await scrape(second), 'toolrouter_index_tools'), 0);
      assert.equal(sample(await scrape(first), 'toolrouter_index_tools'), fixtureTools().length);
      assert.notEqual(first.router.metrics.registry, second.router.metrics.registry);
    } finally {
      await first.close();
      await second.close();
    }
  });
});
