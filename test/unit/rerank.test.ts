import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createReranker, rerankCandidates, remoteReranker } from '../../src/search/rerank.js';
import { counter } from '../helpers/metrics.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { startStandInEmbeddings, type StandInEmbeddings } from '../helpers/stand-in-embeddings.js';
import { syntheticTools } from '../helpers/synthetic.js';
import { tinyModelsDir, writeWordScoreCrossEncoder } from '../helpers/tiny-models.js';


const names = (body: any): string[] => body.results.map((hit: { name: string }) => hit.name);

describe('remote reranker (POST /rerank) through the service', () => {
  let server: StandInEmbeddings;
  let api: RunningRouter;
  const query = 'export the customer report to the warehouse';
  before(async () => {
    server = await startStandInEmbeddings();
    api = await startRouter({ search: { rerank: { enabled: true, url: server.rerankUrl, timeoutMs: 400, topN: 10 } } });
    await api.request('PUT', '/v1/catalog/sources/r', { tools: syntheticTools(120, 'r') });
    await api.indexed();
  });
  after(async () => {
    await api?.close();
    await server?.close();
  });

  it('re-orders the top candidates by the rerank score, shown in scores.rerank; score stays the calibrated estimate', async () => {
    server.received.length = 0;
    const response = await api.post('/v1/tools/search', { query, top_k: 10, min_score: 0 });
    assert.equal(response.status, 200);
    const request = server.received.find((r) => r.path === '/rerank')!;
    assert.equal(request.body.query, query);
    assert.equal(request.body.texts.length, 10);
    const scores = response.body.results.map((hit: any) => hit.scores.rerank);
    assert.ok(scores.every((s: unknown) => typeof s === 'number'), JSON.stringify(scores));
    assert.deepEqual(scores, [...scores].sort((a: number, b: number) => b - a));
    // score is the calibrated relevance (0–1), never above the hit ranked before it, whatever the reranker's scale.
    const relevance: number[] = response.body.results.map((hit: any) => hit.score);
    assert.ok(relevance.every((s) => s >= 0 && s <= 1), JSON.stringify(relevance));
    assert.deepEqual(relevance, [...relevance].sort((a, b) => b - a));
    const fused = await api.post('/v1/tools/search', { query, top_k: 10, rerank: false, min_score: 0 });
    assert.ok(fused.body.results.every((hit: any) => hit.scores.rerank === undefined));
    assert.deepEqual(new Set(names(response.body)), new Set(names(fused.body)), 'the same ten candidates, re-ordered');
    assert.notDeepEqual(names(response.body), names(fused.body), 'the stand-in reranker disagrees with fusion here');
  });

  it('keeps the fused order when the reranker hangs (within its timeout) or fails', async () => {
    const fused = names((await api.post('/v1/tools/search', { query, top_k: 10, rerank: false })).body);
    const timeouts = await counter(api, 'toolrouter_search_reranks_total', { outcome: 'timeout' });
    server.behave({ hang: true });
    const started = Date.now();
    const slow = await api.post('/v1/tools/search', { query, top_k: 10 });
    assert.ok(Date.now() - started < 3_000);
    assert.equal(slow.status, 200);
    assert.deepEqual(names(slow.body), fused);
    assert.equal(await counter(api, 'toolrouter_search_reranks_total', { outcome: 'timeout' }), timeouts + 1);
    server.behave({ fail: { status: 500, times: 1 } });
    assert.deepEqual(names((await api.post('/v1/tools/search', { query, top_k: 10 })).body), fused);
    server.behave({});
  });

  it('reads the Cohere/Jina answer shape too', async () => {
    server.behave({ cohereShape: true });
    const reranker = remoteReranker({ url: server.rerankUrl, model: 'rerank-v3.5' });
    const scores = await reranker.score('send email', ['read a file', 'send an email now', 'email'], new AbortController().signal);
    assert.deepEqual(scores, [0, 2, 1]);
    assert.equal(server.received.at(-1)!.body.model, 'rerank-v3.5');
    server.behave({});
  });
});

describe('min_score', () => {
  let api: RunningRouter;
  before(async () => {
    api = await startRouter();
    await api.request('PUT', '/v1/catalog/sources/m', { tools: syntheticTools(40, 'm') });
    await api.indexed();
  });
  after(() => api?.close());

  it('drops results scoring below it: fewer, or none when nothing fits', async () => {
    const all = await api.post('/v1/tools/search', { query: 'archive a ticket', top_k: 10, min_score: 0 });
    const scores: number[] = all.body.results.map((hit: any) => hit.score);
    assert.equal(scores.length, 10);
    const cut = scores[3]!;
    const some = await api.post('/v1/tools/search', { query: 'archive a ticket', top_k: 10, min_score: cut });
    assert.deepEqual(names(some.body), names(all.body).filter((_, i) => scores[i]! >= cut));
    assert.ok(some.body.results.length < 10);
    const none = await api.post('/v1/tools/search', { query: 'archive a ticket', min_score: 1 });
    assert.equal(none.status, 200);
    assert.deepEqual(none.body.results, []);
    // Scores are calibrated estimates in [0, 1]: a threshold outside that is a mistake, said as such.
    for (const wrong of [-1, 2]) {
      const bad = await api.post('/v1/tools/search', { query: 'archive a ticket', min_score: wrong });
      assert.equal(bad.status, 400);
      assert.match(bad.body.error.message, /min_score/);
    }
  });

  it('applies the configured default when the request gives none', async () => {
    const strict = await startRouter({ search: { minScore: 1 } });
    try {
      await strict.request('PUT', '/v1/catalog/sources/m', { tools: syntheticTools(10, 'm') });
      await strict.indexed();
      assert.deepEqual((await strict.post('/v1/tools/search', { query: 'archive a ticket' })).body.results, []);
      assert.ok((await strict.post('/v1/tools/search', { query: 'archive a ticket', min_score: 0 })).body.results.length > 0);
    } finally {
      await strict.close();
    }
  });
});

describe('cross-encoder reranker through transformers.js (a test-built model)', () => {
  const modelsDir = tinyModelsDir();
  // Logit = Σ word scores over query and document: "weather" counts 3, "forecast" 1, "email" -1.
  writeWordScoreCrossEncoder(modelsDir, 'test/word-reranker', { weather: 3, forecast: 1, email: -1 });

  it('scores pairs with the model and re-orders candidates by its logits', async () => {
    const reranker = (await createReranker(
      { enabled: true, provider: 'transformers', model: 'test/word-reranker', topN: 10, timeoutMs: 5_000 },
      { modelsDir, allowRemoteModels: false },
    ))!;
    const scores = await reranker.score('forecast', ['send email', 'weather weather', 'weather forecast', 'nothing here'], new AbortController().signal);
    assert.deepEqual(scores, [1 - 1, 1 + 6, 1 + 3 + 1, 1]);
    const tool = (name: string, description: string) => ({ name, description, inputSchema: { type: 'object' as const } });
    const candidates: { tool: ReturnType<typeof tool>; score: number; scores: { rerank?: number } }[] = [
      { tool: tool('mail', 'send email'), score: 0.9, scores: {} },
      { tool: tool('sky', 'weather forecast'), score: 0.5, scores: {} },
      { tool: tool('tail', 'weather weather'), score: 0.1, scores: {} },
    ];
    const reranked = await rerankCandidates(reranker, 'forecast', candidates, { enabled: true, topN: 2, timeoutMs: 5_000 }, () => undefined);
    // Only the top 2 are re-scored; the third keeps its fused place and score below them.
    assert.deepEqual(reranked.map((hit) => hit.tool.name), ['sky', 'mail', 'tail']);
    assert.deepEqual(reranked.map((hit) => hit.scores.rerank), [1 + 3 + 1, 1 - 1, undefined]);
  });

  it('serves searches with rerank scores when configured', async () => {
    const api = await startRouter({
      embedding: { modelsDir },
      search: { rerank: { enabled: true, provider: 'transformers', model: 'test/word-reranker', topN: 5, timeoutMs: 5_000 } },
    });
    try {
      await api.request('PUT', '/v1/catalog/sources/w', {
        tools: [
          { name: 'city_forecast', description: 'Forecast for a city', inputSchema: { type: 'object' } },
          { name: 'weather_now', description: 'Current weather and weather alerts', inputSchema: { type: 'object' } },
          { name: 'send_email', description: 'Send an email with the forecast', inputSchema: { type: 'object' } },
        ],
      });
      await api.indexed();
      const response = await api.post('/v1/tools/search', { query: 'forecast' });
      assert.equal(response.status, 200);
      assert.equal(response.body.results[0].name, 'weather_now', JSON.stringify(response.body.results.map((h: any) => [h.name, h.score, h.scores])));
      assert.ok(response.body.results.every((hit: any) => typeof hit.scores.rerank === 'number'));
    } finally {
      await api.close();
    }
  });
});
