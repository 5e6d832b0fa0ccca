import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { LabelledQuery } from '../../src/catalog/types.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { loadConfig } from '../../src/config/config.js';
import { createEngine } from '../../src/eval/engine.js';
import { evaluate } from '../../src/eval/metrics.js';
import { RANKED_DEPTH, tune } from '../../src/eval/tune.js';
import { EVAL_LIMITS } from '../../src/http/routes/tuning.js';
import { DEFAULT_SEARCH_SETTINGS } from '../../src/search/search.js';
import { PrivateRedis } from '../helpers/redis-server.js';
import { eventually, REDIS_URL } from '../helpers/processes.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';

const fixtureQueries = (): LabelledQuery[] =>
  readFileSync(path.join(REPO_ROOT, 'test/fixtures/queries.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as LabelledQuery);

describe('tuning API: POST /v1/eval and /v1/search/settings', () => {
  let api: RunningRouter;

  before(async () => {
    api = await startRouter();
    const put = await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await api.indexed();
  });
  after(() => api.close());

  describe('POST /v1/eval', () => {
    it('reports the same numbers as the eval code over the same tools, for every grid point and the live defaults', async () => {
      const queries = fixtureQueries();
      const response = await api.post('/v1/eval', { queries, grid: { steps: 4 } });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      const engine = await createEngine(fixtureTools(), { config: loadConfig({}), embedder: api.router.embedder });
      const expected = await tune(engine, queries, { steps: 4 });
      const strip = ({ fusion, weights, n, recallAt1, recallAt5, mrr }: any) => ({ fusion, weights, n, recallAt1, recallAt5, mrr });
      assert.equal(response.body.rows.length, 2 * 5);
      assert.deepEqual(response.body.rows, expected.rows.map(strip));
      assert.deepEqual(response.body.best, strip(expected.best));
      assert.equal(response.body.queries, queries.length);
      assert.deepEqual(response.body.skipped, []);
      assert.equal(response.body.index.hash, api.router.catalog.snapshot().catalogHash);
      assert.equal(response.body.catalog.tools, fixtureTools().length);

      const now = await evaluate(
        async (query) => (await engine.search.search({ query, topK: RANKED_DEPTH })).results.map((hit) => hit.tool.name),
        queries,
      );
      const { current } = response.body;
      assert.deepEqual(current.weights, DEFAULT_SEARCH_SETTINGS.weights);
      assert.equal(current.fusion, DEFAULT_SEARCH_SETTINGS.fusion);
      assert.deepEqual(
        { n: current.n, recallAt1: current.recallAt1, recallAt5: current.recallAt5, mrr: current.mrr },
        { n: now.n, recallAt1: now.recallAt1, recallAt5: now.recallAt5, mrr: now.mrr },
      );
      // The grid's ends are the single signals: a real difference between settings is there to be seen.
      assert.ok(new Set(response.body.rows.map((row: any) => row.mrr)).size > 1);
    });

    it('skips queries naming no tool of the live catalog and says which', async () => {
      const queries = [
        { query: 'read the contents of config.yaml', expected: ['fs__read_file'] },
        { query: 'launch the rocket', expected: ['nasa__launch'] },
        { query: 'send an email to Bob', expected: ['nasa__mail', 'gmail__send_email'] },
      ];
      const response = await api.post('/v1/eval', { queries, grid: { steps: 1 } });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.equal(response.body.queries, 2);
      assert.deepEqual(response.body.skipped, [{ line: 2, query: 'launch the rocket' }]);
      assert.equal(response.body.rows.length, 4);
      assert.equal(response.body.steps, 1);
    });

    it('400s with the offending field on bad bodies, and over the caps', async () => {
      const good = { query: 'read a file', expected: ['fs__read_file'] };
      const cases: [unknown, RegExp][] = [
        [[good], /request body must be a JSON object/],
        [{}, /queries: is required/],
        [{ queries: 'read a file' }, /queries: is required and must be an array/],
        [{ queries: [] }, /queries: must hold at least one query/],
        [{ queries: Array.from({ length: EVAL_LIMITS.maxQueries + 1 }, () => good) }, new RegExp(`queries: must hold at most ${EVAL_LIMITS.maxQueries} queries`)],
        [{ queries: [good, { query: 'x' }] }, /queries\.1\.expected: is required/],
        [{ queries: [{ query: 'x', expected: [] }] }, /queries\.0\.expected: must name at least one tool/],
        [{ queries: [{ query: '  ', expected: ['fs__read_file'] }] }, /queries\.0\.query: must not be empty/],
        [{ queries: [{ query: 'x'.repeat(2_001), expected: ['fs__read_file'] }] }, /queries\.0\.query: must be at most 2000 characters/],
        [{ queries: [{ query: 'x', expected: Array.from({ length: EVAL_LIMITS.maxExpected + 1 }, (_, i) => `t${i}`) }] }, /must name at most 50 tools/],
        [{ queries: [{ ...good, relevant: true }] }, /queries\.0: Unrecognized key.*relevant/],
        [{ queries: [good], grid: { steps: 0 } }, /grid\.steps: must be at least 1/],
        [{ queries: [good], grid: { steps: EVAL_LIMITS.maxSteps + 1 } }, new RegExp(`grid\\.steps: must be at most ${EVAL_LIMITS.maxSteps}`)],
        [{ queries: [good], grid: { steps: 2.5 } }, /grid\.steps: must be an integer/],
        [{ queries: [good], grid: { fusions: ['rrf'] } }, /grid: Unrecognized key/],
        [{ queries: [good], limit: 3 }, /Unrecognized key.*limit/],
        [{ queries: [{ query: 'launch the rocket', expected: ['nasa__launch'] }] }, /none of the 1 queries names a tool of the live catalog/],
      ];
      for (const [body, message] of cases) {
        const response = await api.post('/v1/eval', body);
        assert.equal(response.status, 400, `${JSON.stringify(body).slice(0, 80)} → ${JSON.stringify(response.body)}`);
        assert.equal(response.body.error.code, 'invalid_request');
        assert.match(response.body.error.message, message);
      }
      const malformed = await api.post('/v1/eval', '{"queries": [');
      assert.equal(malformed.status, 400);
      assert.equal(malformed.body.error.code, 'invalid_json');
    });
  });

  describe('/v1/search/settings', () => {
    const search = async (body: Record<string, unknown>) =>
      (await api.post('/v1/tools/search', { query: 'send a message to the team channel', top_k: 10, ...body })).body.results.map(
        (hit: any) => `${hit.name}:${hit.score}`,
      );

    it('GET shows the configured defaults', async () => {
      const response = await api.request('GET', '/v1/search/settings');
      assert.equal(response.status, 200);
      assert.deepEqual(response.body.weights, DEFAULT_SEARCH_SETTINGS.weights);
      assert.equal(response.body.fusion, DEFAULT_SEARCH_SETTINGS.fusion);
      assert.equal(response.body.source, 'config');
      assert.equal(response.body.appliedAt, null);
      assert.equal(response.body.scope, 'instance');
      assert.deepEqual(response.body.configured, { weights: DEFAULT_SEARCH_SETTINGS.weights, fusion: DEFAULT_SEARCH_SETTINGS.fusion });
    });

    it('PUT changes the defaults later searches use; DELETE goes back to the configured ones', async () => {
      const configured = await search({});
      const explicit = await search({ weights: { bm25: 0.2, vector: 0.8 }, fusion: 'rrf' });
      assert.notDeepEqual(configured, explicit, 'the chosen setting must rank differently for this test to mean anything');

      const put = await api.request('PUT', '/v1/search/settings', { weights: { bm25: 0.2, vector: 0.8 }, fusion: 'rrf' });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.deepEqual(put.body.weights, { bm25: 0.2, vector: 0.8 });
      assert.equal(put.body.fusion, 'rrf');
      assert.equal(put.body.source, 'applied');
      assert.ok(!Number.isNaN(Date.parse(put.body.appliedAt)));
      assert.deepEqual(put.body.configured.weights, DEFAULT_SEARCH_SETTINGS.weights);
      assert.deepEqual(await search({}), explicit);
      assert.deepEqual((await api.request('GET', '/v1/search/settings')).body, put.body);

      // A partial update keeps what it does not name.
      const fusionOnly = await api.request('PUT', '/v1/search/settings', { fusion: 'weighted' });
      assert.deepEqual(fusionOnly.body.weights, { bm25: 0.2, vector: 0.8 });
      assert.equal(fusionOnly.body.fusion, 'weighted');
      const bm25Only = await api.request('PUT', '/v1/search/settings', { weights: { bm25: 1 } });
      assert.deepEqual(bm25Only.body.weights, { bm25: 1, vector: 0.8 });

      const reset = await api.request('DELETE', '/v1/search/settings');
      assert.equal(reset.status, 200);
      assert.equal(reset.body.source, 'config');
      assert.deepEqual(reset.body.weights, DEFAULT_SEARCH_SETTINGS.weights);
      assert.deepEqual(await search({}), configured);
    });

    it('applied defaults also rank the tools of chat requests (request mode)', async () => {
      const query = 'post a message to the team chat';
      const rewrite = async () => {
        const response = await api.post('/v1/tools/rewrite', {
          model: 'gpt-test',
          messages: [{ role: 'user', content: query }],
          tools: fixtureTools().map((tool) => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.inputSchema } })),
        });
        assert.equal(response.status, 200, JSON.stringify(response.body));
        return (response.body.decision.kept as { name: string; reason: string }[]).filter((kept) => kept.reason === 'ranked').map((kept) => kept.name);
      };
      const lexicalMatches = new Set(
        // Every word match, however weak: min_score 0 (the default cut-off would leave weak matches out of the set).
        ((await api.post('/v1/tools/search', { query, mode: 'bm25', top_k: 50, min_score: 0 })).body.results as { name: string }[]).map((result) => result.name),
      );
      const byDefault = await rewrite();
      assert.ok(byDefault.some((name) => !lexicalMatches.has(name)), 'the default ranking keeps a tool found by meaning alone');

      await api.request('PUT', '/v1/search/settings', { weights: { bm25: 1, vector: 0 } });
      try {
        const bm25Only = await rewrite();
        assert.ok(bm25Only.length > 0);
        assert.deepEqual(bm25Only.filter((name) => !lexicalMatches.has(name)), [], 'with the vector weight at 0 only word matches rank');
      } finally {
        await api.request('DELETE', '/v1/search/settings');
      }
    });

    it('400s on bad settings and changes nothing', async () => {
      const before = (await api.request('GET', '/v1/search/settings')).body;
      const cases: [unknown, RegExp][] = [
        [{}, /give weights, fusion or both/],
        [{ weights: { bm25: -1 } }, /weights\.bm25: must be 0 or more/],
        [{ weights: { bm25: 0, vector: 0 } }, /at least one of bm25 and vector must be positive/],
        [{ weights: { bm25: 'high' } }, /weights\.bm25: must be a number/],
        [{ weights: { bm25: 1e9 } }, /weights\.bm25: must be at most 1000/],
        [{ weights: { bm25: 1, popularity: 1 } }, /weights: Unrecognized key.*popularity/],
        [{ fusion: 'max' }, /fusion: must be weighted or rrf/],
        [{ fusion: 'rrf', mode: 'bm25' }, /Unrecognized key.*mode/],
        [[1], /request body must be a JSON object/],
      ];
      for (const [body, message] of cases) {
        const response = await api.request('PUT', '/v1/search/settings', body);
        assert.equal(response.status, 400, `${JSON.stringify(body)} → ${JSON.stringify(response.body)}`);
        assert.match(response.body.error.message, message);
      }
      assert.deepEqual((await api.request('GET', '/v1/search/settings')).body, before);
    });
  });
});

describe('tuning ranks what /v1/tools/search returns', () => {
  // Tools that answer fixture queries: pinned, they are listed directly and never spent on a search slot, so a grid
  // that re-fused candidates without leaving them out would score rankings no search returns.
  const PINNED = ['fs__read_file', 'github__create_issue', 'slack__post_message'];
  let api: RunningRouter;

  before(async () => {
    api = await startRouter({ search: { pinned: PINNED } });
    const put = await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await api.indexed();
  });
  after(() => api.close());

  it('every grid row scores exactly the rankings searches with its weights and fusion get, pinned tools left out', async () => {
    const queries = fixtureQueries();
    assert.ok(
      queries.filter((labelled) => labelled.expected.some((name) => PINNED.includes(name))).length >= 3,
      'pinned tools must be answers of some queries for this test to mean anything',
    );
    const response = await api.post('/v1/eval', { queries, grid: { steps: 2 } });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.equal(response.body.rows.length, 2 * 3);
    for (const row of response.body.rows) {
      const searched = await evaluate(async (query) => {
        const found = await api.post('/v1/tools/search', { query, mode: 'hybrid', top_k: RANKED_DEPTH, weights: row.weights, fusion: row.fusion });
        assert.equal(found.status, 200, JSON.stringify(found.body));
        const names = found.body.results.map((hit: any) => hit.name as string);
        assert.ok(!names.some((name: string) => PINNED.includes(name)), 'searches never return pinned tools');
        return names;
      }, queries);
      const { n, recallAt1, recallAt5, mrr } = searched;
      assert.deepEqual({ n: row.n, recallAt1: row.recallAt1, recallAt5: row.recallAt5, mrr: row.mrr }, { n, recallAt1, recallAt5, mrr }, JSON.stringify(row));
    }

    // Without pinning the same grid scores differently: leaving pinned tools out is what the rows above measured.
    const unpinned = await createEngine(fixtureTools(), { config: loadConfig({}), embedder: api.router.embedder });
    const grid = await tune(unpinned, queries, { steps: 2 });
    assert.notDeepEqual(
      grid.rows.map((row) => row.mrr),
      response.body.rows.map((row: any) => row.mrr),
    );
  });
});

describe('search settings shared through Redis', () => {
  const prefix = `trtest-${randomUUID().slice(0, 8)}`;
  const settings = { redisUrl: REDIS_URL, queue: { prefix } };
  const redis = new Redis(REDIS_URL);
  const routers: RunningRouter[] = [];
  const start = async () => {
    const router = await startRouter(settings);
    routers.push(router);
    return router;
  };
  const get = async (router: RunningRouter) => (await router.request('GET', '/v1/search/settings')).body;

  after(async () => {
    for (const router of routers) await router.close().catch(() => {});
    const leftovers = await redis.keys(`${prefix}*`);
    if (leftovers.length > 0) await redis.del(...leftovers);
    redis.disconnect();
  });

  it('a change on one instance reaches the others, instances started later load it, and a reset reaches all', async () => {
    const first = await start();
    const second = await start();
    assert.equal((await get(first)).scope, 'cluster');

    const put = await first.request('PUT', '/v1/search/settings', { weights: { bm25: 0.3, vector: 0.7 }, fusion: 'rrf' });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const seen = await eventually(() => get(second), (body) => body.source === 'applied', 10_000);
    assert.deepEqual(seen.weights, { bm25: 0.3, vector: 0.7 });
    assert.equal(seen.fusion, 'rrf');
    assert.equal(seen.appliedAt, put.body.appliedAt);

    const third = await start();
    const loaded = await get(third);
    assert.deepEqual({ weights: loaded.weights, fusion: loaded.fusion, source: loaded.source }, { weights: { bm25: 0.3, vector: 0.7 }, fusion: 'rrf', source: 'applied' });

    // The last change wins everywhere, whichever instance made it.
    await second.request('PUT', '/v1/search/settings', { weights: { bm25: 0.9, vector: 0.1 } });
    // A partial update completes the setting from what its instance has, so let that instance see the change first.
    await eventually(() => get(third), (body) => body.weights.bm25 === 0.9, 10_000);
    await third.request('PUT', '/v1/search/settings', { fusion: 'weighted' });
    for (const router of [first, second, third]) {
      await eventually(() => get(router), (body) => body.fusion === 'weighted' && body.weights.bm25 === 0.9, 10_000);
    }

    const reset = await second.request('DELETE', '/v1/search/settings');
    assert.equal(reset.body.source, 'config');
    for (const router of [first, third]) {
      const body = await eventually(() => get(router), (value) => value.source === 'config', 10_000);
      assert.deepEqual(body.weights, DEFAULT_SEARCH_SETTINGS.weights);
    }
    // The reset is stored, so an instance that missed the announcement still learns of it.
    assert.equal(JSON.parse((await redis.get(`${prefix}:search:settings`))!).applied, null);
    const fourth = await start();
    assert.equal((await get(fourth)).source, 'config');
  });

  it('an instance whose subscription dropped reads what it missed when it reconnects, and ignores malformed messages', async () => {
    const router = routers[0]!;
    await redis.publish(`${prefix}:search:settings:events`, 'not json');
    await redis.publish(`${prefix}:search:settings:events`, JSON.stringify({ version: 1e9, applied: { weights: { bm25: -1, vector: 1 }, fusion: 'rrf', appliedAt: 'x' } }));
    // Stored without an announcement, as if it had been announced while this instance was cut off.
    const version = await redis.incr(`${prefix}:search:settings:version`);
    const applied = { weights: { bm25: 0.125, vector: 0.875 }, fusion: 'rrf', appliedAt: new Date().toISOString() };
    await redis.set(`${prefix}:search:settings`, JSON.stringify({ version, applied }));
    assert.equal((await get(router)).source, 'config');
    // Only the subscribers (one per instance, on the Redis bus) of this test's instances are cut; they reconnect by themselves.
    const clients = (await redis.client('LIST')) as string;
    const ids = clients
      .split('\n')
      .filter((line) => new RegExp(`name=toolrouter-api:${prefix}:\\S*:events`).test(line))
      .map((line) => /id=(\d+)/.exec(line)?.[1])
      .filter((id): id is string => id !== undefined);
    assert.ok(ids.length > 0);
    for (const id of ids) await redis.client('KILL', 'ID', id);
    const body = await eventually(() => get(router), (value) => value.source === 'applied', 10_000);
    assert.deepEqual({ weights: body.weights, fusion: body.fusion }, { weights: applied.weights, fusion: 'rrf' });
  });
});

describe('search settings while Redis is away', () => {
  const redis = new PrivateRedis();
  let api: RunningRouter;

  before(async () => {
    await redis.start();
    api = await startRouter({ redisUrl: redis.url, queue: { prefix: 'settings-outage' } });
  });
  after(async () => {
    await api?.close();
    await redis.stop();
  });

  const subscribed = async (client: Redis) =>
    ((await client.client('LIST')) as string).split('\n').filter((line) => / sub=[1-9]/.test(line)).length;

  it('refuses a change with 503 and changes nothing, then accepts it once Redis is back', async () => {
    // Only this test's instance uses this Redis: its subscribers are all the subscribed connections.
    const probe = new Redis(redis.url);
    const subscribers = await subscribed(probe);
    probe.disconnect();
    assert.ok(subscribers >= 1);
    await redis.stop();
    const put = await api.request('PUT', '/v1/search/settings', { fusion: 'rrf' });
    assert.equal(put.status, 503);
    assert.equal(put.body.error.code, 'redis_unavailable');
    assert.match(put.body.error.message, /changing the search settings failed and nothing was changed/);
    const during = await api.request('GET', '/v1/search/settings');
    assert.equal(during.status, 200, 'reading the settings needs no Redis');
    assert.equal(during.body.fusion, DEFAULT_SEARCH_SETTINGS.fusion);
    assert.equal(during.body.source, 'config');

    await redis.start();
    const retried = await eventually(
      () => api.request('PUT', '/v1/search/settings', { fusion: 'rrf' }),
      (response) => response.status === 200,
      20_000,
    );
    assert.equal(retried.body.fusion, 'rrf');
    assert.equal(retried.body.source, 'applied');

    // The subscription is back too: an announcement that is not stored reaches this instance.
    const direct = new Redis(redis.url);
    try {
      const applied = { weights: { bm25: 0.25, vector: 0.75 }, fusion: 'weighted', appliedAt: new Date().toISOString() };
      const body = await eventually(
        async () => {
          await direct.publish('settings-outage:search:settings:events', JSON.stringify({ version: 1_000, applied }));
          return (await api.request('GET', '/v1/search/settings')).body;
        },
        (value) => value.weights.bm25 === 0.25,
        20_000,
      );
      assert.equal(body.fusion, 'weighted');
      // Every subscriber of the instance (index events too) has resubscribed: closing now leaves no command pending.
      await eventually(() => subscribed(direct), (count) => count === subscribers, 20_000);
    } finally {
      direct.disconnect();
    }
  });
});
