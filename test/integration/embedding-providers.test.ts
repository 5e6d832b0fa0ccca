import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { createEmbedder } from '../../src/embedding/embedder.js';
import { RedisKeys } from '../../src/redis/connection.js';
import { eventually, REDIS_URL, WorkerProcess, writeConfig } from '../helpers/processes.js';
import { counter } from '../helpers/metrics.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { hashedVector, STAND_IN_DIMENSIONS, startStandInEmbeddings, type StandInEmbeddings } from '../helpers/stand-in-embeddings.js';
import { syntheticTools } from '../helpers/synthetic.js';

const models = { modelsDir: 'models', allowRemoteModels: false };


describe('openai embeddings provider', () => {
  let server: StandInEmbeddings;
  before(async () => {
    server = await startStandInEmbeddings();
  });
  after(() => server.close());

  const openai = (extra: Record<string, unknown> = {}) =>
    createEmbedder({ provider: 'openai', baseUrl: server.url, model: 'text-embedding-3-small', batchSize: 3, ...models, ...extra });

  it('batches, sends model, key and dimensions, and returns unit vectors in input order', async () => {
    server.received.length = 0;
    server.behave({});
    const embedder = await openai({ apiKey: 'sk-test', dimensions: 32, concurrency: 2 });
    assert.equal(embedder.modelId, 'openai:text-embedding-3-small@32');
    assert.equal(embedder.dimensions, 32);
    const texts = ['send an email', 'read a file', '', 'list calendar events', 'delete a file', 'weather in paris', 'stock price'];
    const vectors = await embedder.embed(texts);
    assert.equal(vectors.length, texts.length);
    const requests = server.received.filter((r) => r.path === '/v1/embeddings');
    assert.deepEqual(requests.map((r) => r.body.input.length), [3, 3], 'six texts in batches of three');
    assert.ok(requests.every((r) => r.authorization === 'Bearer sk-test' && r.body.model === 'text-embedding-3-small' && r.body.dimensions === 32));
    assert.equal(server.inputs().length, 6, 'the empty text is not sent');
    assert.ok(vectors[2]!.every((v) => v === 0), 'an empty text gets the zero vector');
    const expected = hashedVector('weather in paris', 32);
    const norm = Math.hypot(...expected);
    vectors[5]!.forEach((v, d) => assert.ok(Math.abs(v - expected[d]! / norm) < 1e-6));
    assert.ok(Math.abs(Math.hypot(...vectors[0]!) - 1) < 1e-6);
  });

  it('learns the dimension from the server when none is configured, then refuses a different one', async () => {
    server.behave({});
    const embedder = await openai();
    assert.equal(embedder.dimensions, STAND_IN_DIMENSIONS);
    server.behave({ wrongDimensions: 16 });
    await assert.rejects(embedder.embed(['read a file']), /16 dimensions, expected 64/);
    server.behave({});
  });

  it('retries 429 and 5xx, waiting as Retry-After says rather than its own (long) backoff', async () => {
    const embedder = await openai({ dimensions: 8, backoffMs: 60_000, maxBackoffMs: 60_000 });
    server.received.length = 0;
    server.behave({ fail: { status: 429, times: 2, retryAfter: '0.2' } });
    const started = Date.now();
    const [vector] = await embedder.embed(['read a file']);
    const elapsed = Date.now() - started;
    assert.equal(vector!.length, 8);
    assert.equal(server.received.length, 3);
    assert.ok(elapsed >= 350 && elapsed < 10_000, `took ${elapsed} ms`);

    server.received.length = 0;
    server.behave({ fail: { status: 503, times: 10 } });
    const fast = await openai({ dimensions: 8, retries: 2, backoffMs: 10 });
    await assert.rejects(fast.embed(['read a file']), /503/);
    assert.equal(server.received.length, 3, 'one try and two retries');

    server.received.length = 0;
    server.behave({ fail: { status: 400, times: 1 } });
    await assert.rejects(fast.embed(['read a file']), /400/);
    assert.equal(server.received.length, 1, 'a 400 is not retried');
    server.behave({});
  });

  it('gives up on a request that does not answer within its timeout', async () => {
    const embedder = await openai({ dimensions: 8, retries: 0, timeoutMs: 300 });
    server.behave({ hang: true });
    const started = Date.now();
    await assert.rejects(embedder.embed(['read a file']), /no answer within 300 ms/);
    assert.ok(Date.now() - started < 5_000);
    server.behave({});
  });

  it('embeds queries and documents with the model preset prefixes, and keys the cache by them', async () => {
    server.received.length = 0;
    const embedder = await openai({ model: 'nomic-embed-text', dimensions: 8 });
    await embedder.embed(['read a file']);
    await embedder.embed(['open config'], { role: 'query' });
    assert.deepEqual(server.inputs(), ['search_document: read a file', 'search_query: open config']);
    assert.match(embedder.cacheKey, /^openai:nomic-embed-text@8:search_document: $/);
    const overridden = await openai({ model: 'nomic-embed-text', dimensions: 8, queryPrefix: 'Q: ', documentPrefix: '' });
    server.received.length = 0;
    await overridden.embed(['open config'], { role: 'query' });
    assert.deepEqual(server.inputs(), ['Q: open config']);
  });
});

describe('openai provider through the service (in process)', () => {
  let server: StandInEmbeddings;
  let api: RunningRouter;
  before(async () => {
    server = await startStandInEmbeddings();
    api = await startRouter({
      embedding: { provider: 'openai', baseUrl: server.url, model: 'stand-in', retries: 0, timeoutMs: 5_000 },
      search: { embedTimeoutMs: 400 },
    });
    await api.request('PUT', '/v1/catalog/sources/s', { tools: syntheticTools(30, 's') });
    await api.indexed();
  });
  after(async () => {
    await api?.close();
    await server?.close();
  });

  it('indexes with the server, searches hybrid, and re-embeds only a changed tool', async () => {
    const status = (await api.request('GET', '/v1/index/status')).body;
    assert.equal(status.model, 'openai:stand-in');
    const hybrid = await api.post('/v1/tools/search', { query: 's7 import invoice', mode: 'vector' });
    assert.equal(hybrid.status, 200);
    assert.equal(hybrid.body.fallback, undefined);
    assert.ok(hybrid.body.results.length > 0 && hybrid.body.results.every((r: any) => typeof r.scores.vector === 'number'));

    const tools = syntheticTools(30, 's');
    tools[3] = { ...tools[3]!, description: 'Send a carrier pigeon with the quarterly numbers.' };
    server.received.length = 0;
    await api.request('PUT', '/v1/catalog/sources/s', { tools });
    await api.indexed();
    assert.equal(server.inputs().length, 1, `embedded ${JSON.stringify(server.inputs())}`);
    assert.match(server.inputs()[0]!, /carrier pigeon/);
  });

  it('answers from BM25 within the timeout when the server hangs or fails, says so, and counts it', async () => {
    const timeoutsBefore = await counter(api, 'toolrouter_search_fallbacks_total', { reason: 'embedding_timeout' });
    server.behave({ hang: true });
    const started = Date.now();
    const [slow, health] = await Promise.all([
      api.post('/v1/tools/search', { query: 's7 import invoice' }),
      (async () => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const t = Date.now();
        const response = await api.request('GET', '/health');
        return { status: response.status, ms: Date.now() - t };
      })(),
    ]);
    const elapsed = Date.now() - started;
    assert.equal(slow.status, 200);
    assert.equal(slow.body.fallback?.mode, 'bm25');
    assert.equal(slow.body.fallback?.reason, 'embedding_timeout');
    const bm25 = await api.post('/v1/tools/search', { query: 's7 import invoice', mode: 'bm25' });
    assert.deepEqual(slow.body.results.map((r: any) => r.name), bm25.body.results.map((r: any) => r.name));
    assert.ok(elapsed < 3_000, `search took ${elapsed} ms with a 400 ms embedding timeout`);
    assert.equal(health.status, 200);
    assert.ok(health.ms < 1_000, `/health took ${health.ms} ms`);
    assert.equal(await counter(api, 'toolrouter_search_fallbacks_total', { reason: 'embedding_timeout' }), timeoutsBefore + 1);

    server.behave({ fail: { status: 500, times: 1 } });
    // min_score 0: the fallback's ranking is under test (on these synthetic tools BM25's calibrated scores are low).
    const failed = await api.post('/v1/tools/search', { query: 's7 import invoice', mode: 'vector', min_score: 0 });
    assert.equal(failed.status, 200);
    assert.equal(failed.body.fallback?.reason, 'embedding_error');
    assert.ok(failed.body.results.length > 0);

    server.behave({});
    const back = await api.post('/v1/tools/search', { query: 's7 import invoice' });
    assert.equal(back.body.fallback, undefined);
  });
});

describe('openai provider with Redis and a real worker process', () => {
  const prefix = `trtest-emb-${randomUUID().slice(0, 8)}`;
  const keys = new RedisKeys(prefix);
  const redis = new Redis(REDIS_URL);
  let server: StandInEmbeddings;
  let worker: WorkerProcess;
  let api: RunningRouter;
  let settings: Record<string, unknown>;

  before(async () => {
    server = await startStandInEmbeddings();
    settings = {
      redisUrl: REDIS_URL,
      queue: { prefix, attempts: 5, backoffMs: 200, lockDurationMs: 3_000, stalledIntervalMs: 1_000 },
      embedding: { provider: 'openai', baseUrl: server.url, model: 'stand-in', apiKey: 'sk-worker', retries: 1, timeoutMs: 5_000 },
    };
    worker = new WorkerProcess(writeConfig({ ...settings, logLevel: 'info' }));
    await worker.ready();
    api = await startRouter(settings);
  });
  after(async () => {
    await api?.close().catch(() => {});
    await worker?.kill('SIGTERM');
    await server?.close();
    const leftovers = [...(await redis.keys(`${prefix}*`)), ...(await redis.keys(`bull:${keys.indexQueue}:*`))];
    if (leftovers.length > 0) await redis.del(...leftovers);
    redis.disconnect();
  });

  const status = async () => (await api.request('GET', '/v1/index/status')).body;
  const ready = () => eventually(status, (s) => s.state === 'ready' && s.indexedHash === s.catalogHash);

  it('the worker embeds through the server, a failing server makes the build retry while the last index serves', async () => {
    await api.request('PUT', '/v1/catalog/sources/w', { tools: syntheticTools(40, 'w') });
    const first = await ready();
    assert.equal(first.model, 'openai:stand-in');
    assert.ok(server.received.some((r) => r.authorization === 'Bearer sk-worker'));
    // Not `builds().at(-1)`: the swap can reach the API before the worker's log line reaches this process, and the
    // last line seen would then be an earlier build's (the empty catalog the API started with).
    const built = await worker.buildOf(first.indexedHash);
    assert.equal(built.outcome, 'built');
    assert.ok(Number(built.embedded) >= 40);

    // Down for the first attempts of the next build: attempt 1 (two requests) and attempt 2 fail, a later one builds.
    server.behave({ fail: { status: 503, times: 3 } });
    const tools = syntheticTools(40, 'w');
    tools[9] = { ...tools[9]!, description: 'Send a carrier pigeon with the quarterly numbers.' };
    const failedBefore = worker.logs.filter((line) => line.msg === 'index build failed').length;
    await api.request('PUT', '/v1/catalog/sources/w', { tools });
    const during = await api.post('/v1/tools/search', { query: 'w3', mode: 'bm25' });
    assert.equal(during.status, 200);
    assert.ok(during.body.results.length > 0, 'the last good index keeps serving');
    const final = await ready();
    assert.notEqual(final.indexedHash, first.indexedHash);
    assert.ok(worker.logs.filter((line) => line.msg === 'index build failed').length > failedBefore, 'a build attempt failed first');
    assert.equal((await worker.buildOf(final.indexedHash)).embedded, 1, 'only the changed tool is embedded again');
    const found = await api.post('/v1/tools/search', { query: 'carrier pigeon quarterly', mode: 'vector' });
    assert.equal(found.body.results[0]?.name, tools[9]!.name);
  });
});
