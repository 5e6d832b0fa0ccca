import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';

const simpleTool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { input: { type: 'string', description: 'value' } } },
});

describe('REST API', () => {
  let api: RunningRouter;

  before(async () => {
    api = await startRouter({ search: { pinned: ['fs__read_file'] } });
    const put = await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await api.indexed();
  });
  after(() => api.close());

  describe('catalog', () => {
    it('PUT returns the catalog hash and tool count; GET lists tools with their source', async () => {
      const put = await api.request('PUT', '/v1/catalog/sources/extra', { tools: [simpleTool('extra_tool', 'an extra tool')] });
      assert.equal(put.status, 200);
      assert.equal(put.body.tools, 1);
      assert.match(put.body.catalogHash, /^[0-9a-f]{64}$/);
      const list = await api.request('GET', '/v1/catalog');
      assert.equal(list.status, 200);
      assert.equal(list.body.catalogHash, put.body.catalogHash);
      assert.equal(list.body.tools.length, fixtureTools().length + 1);
      const extra = list.body.tools.find((entry: any) => entry.tool.name === 'extra_tool');
      assert.equal(extra.source, 'extra');
      assert.deepEqual(extra.tool, simpleTool('extra_tool', 'an extra tool'));
      const removed = await api.request('DELETE', '/v1/catalog/sources/extra');
      assert.equal(removed.status, 200);
      assert.notEqual(removed.body.catalogHash, put.body.catalogHash);
      await api.indexed();
    });

    it('409s on a name that another source owns and keeps the catalog as it was', async () => {
      const before = await api.request('GET', '/v1/catalog');
      const clash = await api.request('PUT', '/v1/catalog/sources/other', { tools: [simpleTool('gmail__send_email', 'mine now')] });
      assert.equal(clash.status, 409);
      assert.equal(clash.body.error.code, 'conflict');
      assert.match(clash.body.error.message, /gmail__send_email.*fixture/);
      const afterClash = await api.request('GET', '/v1/catalog');
      assert.equal(afterClash.body.catalogHash, before.body.catalogHash);
    });

    it('400s with the offending tool and field on invalid tools', async () => {
      const bad = await api.request('PUT', '/v1/catalog/sources/bad', {
        tools: [simpleTool('fine', 'ok'), { name: 'no schema' }, { name: 'x', inputSchema: { type: 'array' } }],
      });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'invalid_request');
      assert.match(bad.body.error.message, /tools\[1\] \("no schema"\): name must be/);
      assert.match(bad.body.error.message, /tools\[2\] \("x"\): inputSchema.type/);
      const list = await api.request('GET', '/v1/catalog');
      assert.equal(list.body.tools.some((entry: any) => entry.tool.name === 'fine'), false);
    });

    it('400s on bodies that are not {tools: [...]} and on bad source names', async () => {
      assert.equal((await api.request('PUT', '/v1/catalog/sources/x', { tools: 'nope' })).status, 400);
      assert.equal((await api.request('PUT', '/v1/catalog/sources/x', [])).status, 400);
      assert.equal((await api.request('PUT', '/v1/catalog/sources/x', { tools: [], extra: 1 })).status, 400);
      const badName = await api.request('PUT', '/v1/catalog/sources/bad%20name', { tools: [] });
      assert.equal(badName.status, 400);
      assert.match(badName.body.error.message, /source name/);
    });

    it('404s when deleting an unknown source', async () => {
      const response = await api.request('DELETE', '/v1/catalog/sources/never-existed');
      assert.equal(response.status, 404);
      assert.equal(response.body.error.code, 'not_found');
    });
  });

  describe('search', () => {
    it('returns full tool definitions with scores, and the index identity', async () => {
      const response = await api.post('/v1/tools/search', { query: 'send an email', mode: 'bm25' });
      assert.equal(response.status, 200);
      assert.equal(response.body.results.length, 5);
      const top = response.body.results[0];
      assert.equal(top.name, 'gmail__send_email');
      const definition = fixtureTools().find((tool) => tool.name === top.name)!;
      assert.deepEqual({ ...top, score: undefined, scores: undefined }, { ...definition, score: undefined, scores: undefined });
      assert.ok(top.score > 0 && typeof top.scores.bm25 === 'number');
      assert.equal(response.body.index.hash, api.router.catalog.snapshot().catalogHash);
      assert.equal(response.body.index.model, 'toolrouter/glove-100d-sif-150k');
    });

    it('honours top_k and caps it at the configured maximum', async () => {
      const three = await api.post('/v1/tools/search', { query: 'file', top_k: 3, mode: 'bm25' });
      assert.equal(three.body.results.length, 3);
      const many = await api.post('/v1/tools/search', { query: 'a the of to file issue email', top_k: 100000, mode: 'hybrid' });
      assert.equal(many.status, 200);
      assert.ok(many.body.results.length <= 50);
    });

    it('scores every mode: vector and hybrid return per-signal scores', async () => {
      const vector = await api.post('/v1/tools/search', { query: 'weather forecast for tomorrow', mode: 'vector' });
      assert.equal(vector.status, 200);
      assert.ok(vector.body.results[0].scores.vector > 0);
      assert.equal(vector.body.results[0].scores.bm25, undefined);
      const hybrid = await api.post('/v1/tools/search', { query: 'weather forecast for tomorrow' });
      assert.equal(hybrid.status, 200);
      assert.ok(hybrid.body.results[0].name.startsWith('weather__'), hybrid.body.results[0].name);
      assert.ok('bm25' in hybrid.body.results[0].scores && 'vector' in hybrid.body.results[0].scores);
    });

    it('never returns pinned tools from ranked or regex search', async () => {
      for (const mode of ['bm25', 'vector', 'hybrid', 'regex']) {
        const query = mode === 'regex' ? 'file' : 'read the contents of a file';
        const response = await api.post('/v1/tools/search', { query, mode, top_k: 50 });
        assert.equal(response.status, 200);
        assert.ok(response.body.results.length > 0, mode);
        assert.ok(!response.body.results.some((hit: any) => hit.name === 'fs__read_file'), `${mode} returned a pinned tool`);
      }
    });

    it('regex mode is case-insensitive, in catalog order, and returns nothing for an invalid pattern', async () => {
      const response = await api.post('/v1/tools/search', { query: 'GMAIL__(send|search)', mode: 'regex', top_k: 10 });
      const names = response.body.results.map((hit: any) => hit.name);
      const catalogOrder = fixtureTools().map((tool) => tool.name).filter((name) => /gmail__(send|search)/i.test(name));
      assert.deepEqual(names, catalogOrder);
      assert.ok(names.length >= 2);
      const invalid = await api.post('/v1/tools/search', { query: '(unclosed[', mode: 'regex' });
      assert.equal(invalid.status, 200);
      assert.deepEqual(invalid.body.results, []);
    });

    it('regex mode survives a catastrophic-backtracking pattern', async () => {
      const started = performance.now();
      const response = await api.post('/v1/tools/search', { query: '(a+)+$', mode: 'regex' });
      assert.equal(response.status, 200);
      // Not a timing target: a backtracking engine would take minutes here, RE2 is linear.
      assert.ok(performance.now() - started < 5_000);
    });

    it('select: returns exactly the named tools in the given order and skips unknown names', async () => {
      const response = await api.post('/v1/tools/search', { query: 'select:slack__post_message, gmail__send_email,nope' });
      assert.deepEqual(response.body.results.map((hit: any) => hit.name), ['slack__post_message', 'gmail__send_email']);
    });

    it('accepts per-request weights and fusion', async () => {
      const lexicalOnly = await api.post('/v1/tools/search', { query: 'create an issue', weights: { bm25: 1, vector: 0 }, top_k: 10, min_score: 0 });
      const bm25 = await api.post('/v1/tools/search', { query: 'create an issue', mode: 'bm25', top_k: 10, min_score: 0 });
      assert.deepEqual(lexicalOnly.body.results.map((hit: any) => hit.name), bm25.body.results.map((hit: any) => hit.name));
      const rrf = await api.post('/v1/tools/search', { query: 'create an issue', fusion: 'rrf' });
      assert.equal(rrf.status, 200);
      // The ranking's own score is scores.fused; `score` is the calibrated estimate, in [0, 1] whatever the fusion.
      assert.ok(rrf.body.results[0].scores.fused < 0.05, 'rrf scores are sums of 1/(60+rank)');
      assert.ok(rrf.body.results[0].score >= 0 && rrf.body.results[0].score <= 1);
    });

    const badBodies: [string, unknown, RegExp][] = [
      ['missing query', {}, /query: is required/],
      ['non-string query', { query: 42 }, /query: is required and must be a string/],
      ['empty query', { query: '   ' }, /query: must not be empty/],
      ['oversized query', { query: 'x'.repeat(5000) }, /query: must be at most 2000 characters/],
      ['zero top_k', { query: 'x', top_k: 0 }, /top_k: must be at least 1/],
      ['fractional top_k', { query: 'x', top_k: 1.5 }, /top_k: must be an integer/],
      ['string top_k', { query: 'x', top_k: '5' }, /top_k/],
      ['unknown mode', { query: 'x', mode: 'fuzzy' }, /mode: must be one of hybrid, bm25, vector, regex/],
      ['negative weight', { query: 'x', weights: { bm25: -1 } }, /weights.bm25: must be 0 or more/],
      ['string weight', { query: 'x', weights: { bm25: 'high' } }, /weights.bm25/],
      ['unknown weight', { query: 'x', weights: { semantic: 1 } }, /weights/],
      ['all-zero weights', { query: 'x', weights: { bm25: 0, vector: 0 } }, /at least one of bm25 and vector must be positive/],
      ['unknown fusion', { query: 'x', fusion: 'max' }, /fusion: must be weighted or rrf/],
      ['unknown field', { query: 'x', topK: 3 }, /topK|Unrecognized/i],
      ['array body', [], /request body must be a JSON object/],
    ];
    for (const [label, body, message] of badBodies) {
      it(`400s on ${label}`, async () => {
        const response = await api.post('/v1/tools/search', body);
        assert.equal(response.status, 400, JSON.stringify(response.body));
        assert.equal(response.body.error.code, 'invalid_request');
        assert.match(response.body.error.message, message);
      });
    }
  });

  describe('transport-level bad input', () => {
    it('400s on malformed JSON with a JSON error body', async () => {
      const response = await api.post('/v1/tools/search', '{"query": "x",');
      assert.equal(response.status, 400);
      assert.equal(response.body.error.code, 'invalid_json');
    });
    it('400s on a body sent without a JSON content type', async () => {
      const response = await fetch(`${api.url}/v1/tools/search`, { method: 'POST', body: 'query=x' });
      assert.equal(response.status, 400);
      assert.match(((await response.json()) as any).error.message, /Content-Type: application\/json/);
    });
    it('413s on a body over the size limit', async () => {
      const response = await api.request('PUT', '/v1/catalog/sources/huge', { tools: [simpleTool('t', 'x'.repeat(21 * 1024 * 1024))] });
      assert.equal(response.status, 413);
      assert.equal(response.body.error.code, 'payload_too_large');
    });
    it('404s on unknown routes with a JSON error body', async () => {
      const response = await api.request('GET', '/v1/nope');
      assert.equal(response.status, 404);
      assert.equal(response.body.error.code, 'not_found');
    });
  });

  describe('index status', () => {
    it('reports ready with the indexed hash, model and tool count', async () => {
      await api.indexed();
      const status = await api.request('GET', '/v1/index/status');
      assert.equal(status.status, 200);
      assert.equal(status.body.state, 'ready');
      assert.equal(status.body.catalogHash, status.body.indexedHash);
      assert.equal(status.body.model, 'toolrouter/glove-100d-sif-150k');
      assert.equal(status.body.tools, fixtureTools().length);
      assert.ok(!Number.isNaN(Date.parse(status.body.builtAt)));
    });
    it('makes a new tool searchable after a catalog change', async () => {
      await api.request('PUT', '/v1/catalog/sources/late', { tools: [simpleTool('zebra_feeder', 'dispense food for zebras at the zoo')] });
      await api.indexed();
      const response = await api.post('/v1/tools/search', { query: 'zebras zoo food' });
      assert.equal(response.body.results[0].name, 'zebra_feeder');
      await api.request('DELETE', '/v1/catalog/sources/late');
      const gone = await api.post('/v1/tools/search', { query: 'zebras zoo food', mode: 'bm25' });
      assert.ok(!gone.body.results.some((hit: any) => hit.name === 'zebra_feeder'), 'removed tool still returned');
    });
    it('POST /v1/index/rebuild answers 202 and rebuilds', async () => {
      const before = api.router.indexes.current;
      const response = await api.post('/v1/index/rebuild', {});
      assert.equal(response.status, 202);
      await api.router.pipeline.idle();
      assert.ok(api.router.indexes.current && api.router.indexes.current !== before, 'index was not replaced');
      assert.equal(api.router.indexes.status().state, 'ready');
    });
  });
});
