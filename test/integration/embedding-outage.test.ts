import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { counter } from '../helpers/metrics.js';
import { waitFor } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { startStandInEmbeddings, type StandInEmbeddings } from '../helpers/stand-in-embeddings.js';
import { syntheticTools } from '../helpers/synthetic.js';

/**
 * The embed timeout and the request timeout are a minute each: a search that waited for the embed timeout would not
 * come back before the test's own timeout, and would say `embedding_timeout`. So an answer saying `embedding_error`
 * shows the search did not wait for it (ordering, not a wall-clock threshold); the provider's failure count shows it
 * did not retry either (4 retries are configured).
 */
const MINUTE = 60_000;

const events = (api: RunningRouter, event: string) => counter(api, 'toolrouter_embedding_provider_events_total', { event });

describe('an embeddings outage: searches answer from BM25 at once, and the provider is left alone for a cooldown', { timeout: 50_000 }, () => {
  let server: StandInEmbeddings | undefined;
  let port: number;
  let api: RunningRouter;

  before(async () => {
    server = await startStandInEmbeddings();
    port = Number(new URL(server.url).port);
    api = await startRouter({
      embedding: { provider: 'openai', baseUrl: server.url, model: 'stand-in', retries: 4, timeoutMs: MINUTE, failuresBeforeCooldown: 3, cooldownMs: 1_500 },
      search: { embedTimeoutMs: MINUTE },
    });
    await api.request('PUT', '/v1/catalog/sources/s', { tools: syntheticTools(30, 's') });
    await api.indexed();
    const hybrid = await api.post('/v1/tools/search', { query: 's7 import invoice' });
    assert.equal(hybrid.body.fallback, undefined, 'hybrid while the provider is up');
  });

  after(async () => {
    await api?.close();
    await server?.close();
  });

  it('a refused connection: embedding_error at once, BM25 results; after 3 failures not asked until the cooldown ends', async () => {
    await server!.close();
    server = undefined;
    const bm25 = (await api.post('/v1/tools/search', { query: 's7 import invoice', mode: 'bm25' })).body.results.map((r: any) => r.name);

    // Three searches against the closed port: each fails once (no retry), the third starts the cooldown.
    for (let i = 1; i <= 3; i++) {
      const refused = await api.post('/v1/tools/search', { query: 's7 import invoice' });
      assert.equal(refused.status, 200);
      assert.equal(refused.body.fallback?.reason, 'embedding_error', JSON.stringify(refused.body.fallback));
      assert.match(refused.body.fallback.message, /ECONNREFUSED/);
      assert.deepEqual(refused.body.results.map((r: any) => r.name), bm25);
      assert.equal(await events(api, 'failure'), i, 'one request per search: a refused connection is not retried');
    }
    assert.equal(await events(api, 'cooldown'), 1);
    assert.equal(await counter(api, 'toolrouter_embedding_provider_cooling_down', {}), 1);

    // The provider is back, but within the cooldown it is not asked: searches still answer from BM25, and say why.
    server = await startStandInEmbeddings(port);
    const skipped = await api.post('/v1/tools/search', { query: 's7 import invoice' });
    assert.equal(skipped.body.fallback?.reason, 'embedding_error');
    assert.match(skipped.body.fallback.message, /not asked .* after 3 failures in a row/);
    assert.deepEqual(server.received, [], 'no request reached the provider during the cooldown');
    assert.equal(await events(api, 'skipped'), 1);
    assert.equal(await events(api, 'failure'), 3);

    // After the cooldown one query tries it again; it answers, and searches are hybrid again.
    const back = await waitFor('a hybrid search after the cooldown', async () => {
      const answer = await api.post('/v1/tools/search', { query: 's7 import invoice' });
      return answer.body.fallback === undefined ? answer : undefined;
    }, 20_000);
    assert.ok(back.body.results.every((r: any) => typeof r.scores.vector === 'number'));
    assert.equal(server.received.length, 1, 'the provider was asked once, by the probe');
    assert.equal(await events(api, 'recovered'), 1);
    assert.equal(await counter(api, 'toolrouter_embedding_provider_cooling_down', {}), 0);
  });

  it('a reset connection fails at once too', async () => {
    server!.behave({ reset: true });
    const failuresBefore = await events(api, 'failure');
    const reset = await api.post('/v1/tools/search', { query: 's7 import invoice' });
    assert.equal(reset.body.fallback?.reason, 'embedding_error', JSON.stringify(reset.body.fallback));
    assert.equal(await events(api, 'failure'), failuresBefore + 1);
    assert.equal(server!.received.length, 2, 'asked once, not retried');
    server!.behave({});
  });
});
