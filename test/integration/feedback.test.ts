import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Tool } from '../../src/catalog/types.js';
import { loadConfig } from '../../src/config/config.js';
import { createEmbedder, type Embedder } from '../../src/embedding/embedder.js';
import { createEngine, type Engine } from '../../src/eval/engine.js';
import { replayFeedback, splitForFeedback } from '../../src/eval/feedback.js';
import { FeedbackNeighbours } from '../../src/feedback/neighbours.js';
import { FeedbackService } from '../../src/feedback/service.js';
import { MemoryFeedbackStore } from '../../src/feedback/store.js';
import { DAY_MS, DEFAULT_FEEDBACK_SETTINGS, type FeedbackEvent, type FeedbackSettings } from '../../src/feedback/types.js';
import { fuse } from '../../src/search/fusion.js';
import { queryEmbedding } from '../../src/search/search.js';
import { connectHttpClient, stdioFixtureServer, textOf } from '../helpers/mcp.js';
import { eventually } from '../helpers/processes.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { postJson, startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';

/** A unit vector along axis `axis`, tilted towards axis `axis + 1` by `tilt` (cosine with the pure axis = cos(tilt)). */
function unit(dimensions: number, axis: number, tilt = 0): Float32Array {
  const vector = new Float32Array(dimensions);
  vector[axis] = Math.cos(tilt);
  vector[(axis + 1) % dimensions] = Math.sin(tilt);
  return vector;
}

let serial = 0;
function event(embedding: Float32Array, tool: string, extra: Partial<FeedbackEvent> = {}): FeedbackEvent {
  return { id: `e${serial++}`, query: 'q', embedding, model: 'm', tool, relevant: true, time: 0, scope: '', ...extra };
}

const settings = (extra: Partial<FeedbackSettings> = {}): FeedbackSettings => ({ ...DEFAULT_FEEDBACK_SETTINGS, ...extra });

describe('feedback neighbours', () => {
  it('sums similarity over the nearest recorded queries above the threshold, signed by relevance', () => {
    const neighbours = new FeedbackNeighbours(4, settings({ minSimilarity: 0.5, maxBoost: 4 }), () => 0);
    neighbours.add(event(unit(4, 0), 'a'));
    neighbours.add(event(unit(4, 0, Math.acos(0.8)), 'a'));
    neighbours.add(event(unit(4, 0), 'b', { relevant: false }));
    // Cosine 0 with the query: says nothing.
    neighbours.add(event(unit(4, 2), 'c'));
    const boosts = neighbours.boosts(unit(4, 0), undefined);
    assert.deepEqual(
      boosts.map((hit) => [hit.name, Number(hit.score.toFixed(4))]),
      [['a', Number((1.8 / 4).toFixed(4))], ['b', -0.25]],
    );
  });

  it('caps each tool at maxBoost so a popular tool saturates instead of crowding the others out', () => {
    const neighbours = new FeedbackNeighbours(4, settings({ minSimilarity: 0.5, maxBoost: 2, neighbours: 50 }), () => 0);
    for (let i = 0; i < 20; i++) neighbours.add(event(unit(4, 0), 'popular'));
    neighbours.add(event(unit(4, 0), 'niche'));
    const boosts = Object.fromEntries(neighbours.boosts(unit(4, 0), undefined).map((hit) => [hit.name, hit.score]));
    assert.equal(boosts.popular, 1, 'capped at maxBoost, reported as 1');
    assert.equal(boosts.niche, 0.5);
  });

  it('consults only the `neighbours` most similar events', () => {
    const neighbours = new FeedbackNeighbours(4, settings({ minSimilarity: 0.1, neighbours: 2, maxBoost: 10 }), () => 0);
    neighbours.add(event(unit(4, 0, 0.6), 'far'));
    neighbours.add(event(unit(4, 0), 'near'));
    neighbours.add(event(unit(4, 0, 0.1), 'near'));
    assert.deepEqual(neighbours.boosts(unit(4, 0), undefined).map((hit) => hit.name), ['near']);
  });

  it('decays events by their half-life and forgets them past maxAgeDays', () => {
    let now = 1_000 * DAY_MS;
    const neighbours = new FeedbackNeighbours(4, settings({ halfLifeDays: 10, maxAgeDays: 100, maxBoost: 1 }), () => now);
    neighbours.add(event(unit(4, 0), 'a', { time: now }));
    assert.equal(neighbours.boosts(unit(4, 0), undefined)[0]!.score, 1);
    now += 10 * DAY_MS;
    assert.ok(Math.abs(neighbours.boosts(unit(4, 0), undefined)[0]!.score - 0.5) < 1e-9);
    now += 10 * DAY_MS;
    assert.ok(Math.abs(neighbours.boosts(unit(4, 0), undefined)[0]!.score - 0.25) < 1e-9);
    now += 81 * DAY_MS;
    assert.deepEqual(neighbours.boosts(unit(4, 0), undefined), []);
    neighbours.compact();
    assert.equal(neighbours.size, 0);
  });

  it('keeps the newest maxEvents events', () => {
    const neighbours = new FeedbackNeighbours(4, settings({ maxEvents: 100, neighbours: 1000, maxBoost: 1000, minSimilarity: 0.5 }), () => 0);
    for (let i = 0; i < 100; i++) neighbours.add(event(unit(4, 0), 'old'));
    for (let i = 0; i < 100; i++) neighbours.add(event(unit(4, 0), 'new'));
    neighbours.compact();
    assert.equal(neighbours.size, 100);
    assert.deepEqual(neighbours.boosts(unit(4, 0), undefined).map((hit) => hit.name), ['new']);
  });

  it('filters by scope when asked, and ignores an event it already holds', () => {
    const neighbours = new FeedbackNeighbours(4, settings({ maxBoost: 1 }), () => 0);
    const first = event(unit(4, 0), 'a', { scope: 'key-1' });
    assert.equal(neighbours.add(first), true);
    assert.equal(neighbours.add(first), false);
    neighbours.add(event(unit(4, 0), 'b', { scope: 'key-2' }));
    assert.deepEqual(neighbours.boosts(unit(4, 0), 'key-1').map((hit) => hit.name), ['a']);
    assert.deepEqual(neighbours.boosts(unit(4, 0), 'key-2').map((hit) => hit.name), ['b']);
    assert.deepEqual(neighbours.boosts(unit(4, 0), '').map((hit) => hit.name), []);
    assert.deepEqual(neighbours.boosts(unit(4, 0), undefined).map((hit) => hit.name).sort(), ['a', 'b']);
  });
});

describe('feedback fusion', () => {
  const lexical = [{ name: 'x', score: 9 }, { name: 'y', score: 5 }, { name: 'z', score: 1 }];
  const semantic = [{ name: 'x', score: 0.8 }, { name: 'y', score: 0.6 }, { name: 'z', score: 0.5 }];

  it('scores exactly as before when feedback has nothing for the query', () => {
    const weights = { bm25: 0.55, vector: 0.45, feedback: 1 };
    assert.deepEqual(fuse(lexical, semantic, weights, 'weighted', []), fuse(lexical, semantic, { bm25: 0.55, vector: 0.45 }, 'weighted'));
  });

  it('lets a boosted tool enter the list and a negative one only sink, with scores kept in [0, 1]', () => {
    const fused = fuse(lexical, semantic, { bm25: 0.55, vector: 0.45, feedback: 1 }, 'weighted', [
      { name: 'z', score: 1 },
      { name: 'w', score: 0.5 },
      { name: 'x', score: -1 },
      { name: 'v', score: -1 },
    ]);
    // w (feedback 0.5 only) edges past y (middling on both other signals); x, reported irrelevant, sinks to 0; v is not added.
    assert.deepEqual(fused.map((hit) => hit.name), ['z', 'w', 'y', 'x']);
    assert.equal(fused.at(-1)!.score, 0);
    assert.equal(fused.find((hit) => hit.name === 'w')!.scores.feedback, 0.5);
    for (const hit of fused) assert.ok(hit.score >= 0 && hit.score <= 1, `${hit.name}: ${hit.score}`);
  });
});

// Ranking with feedback is under test in these searches, so they ask for every candidate (min_score 0): abstention
// would otherwise cut the low-scoring tools whose rise the tests watch.
describe('feedback in search (real embedder, fixture catalog)', () => {
  let embedder: Embedder;
  let engine: Engine;
  const query = 'tell the team that the release is out';

  before(async () => {
    const config = loadConfig({}, { logLevel: 'silent' });
    embedder = await createEmbedder(config.embedding);
    engine = await createEngine(fixtureTools(), { config, embedder });
  });

  const ranked = async (request: Parameters<Engine['search']['search']>[0]) =>
    (await engine.search.search({ topK: 10, minScore: 0, ...request })).results.map((hit) => hit.tool.name);

  it('moves a tool agents called for this query to the top, and back when the weight is 0', async () => {
    const before = await ranked({ query });
    const called = before[4]!;
    for (let i = 0; i < 4; i++) await engine.feedback!.record({ query, tool: called, relevant: true, surface: 'rest' });
    const afterFeedback = await engine.search.search({ query, topK: 10, minScore: 0 });
    assert.equal(afterFeedback.results[0]!.tool.name, called, afterFeedback.results.map((hit) => hit.tool.name).join(', '));
    assert.ok(afterFeedback.results[0]!.scores.feedback! > 0.999, 'four identical queries reach the cap');
    // A similar query, not the same words, benefits too.
    const similar = await ranked({ query: 'tell the team the new release is out now' });
    assert.ok(similar.indexOf(called) < before.indexOf(called), `${called} did not rise: ${similar.join(', ')}`);
    assert.deepEqual(await ranked({ query, weights: { feedback: 0 } }), before);
    assert.deepEqual(await ranked({ query, mode: 'bm25' }), await ranked({ query, mode: 'bm25', weights: { feedback: 0 } }));
  });

  it('brings in a tool neither BM25 nor the vectors returned, and never one the caller cannot see', async () => {
    const narrow = await createEngine(fixtureTools(), { config: loadConfig({}, { logLevel: 'silent', search: { candidates: 3 } }), embedder });
    const q = 'what is the weather forecast for Lisbon';
    const zeroShot = (await narrow.search.search({ query: q, topK: 50, minScore: 0 })).results.map((hit) => hit.tool.name);
    const outsider = fixtureTools().map((tool) => tool.name).find((name) => !zeroShot.includes(name) && name.startsWith('gmail__'))!;
    assert.ok(outsider, 'a tool outside the candidates');
    for (let i = 0; i < 4; i++) await narrow.feedback!.record({ query: q, tool: outsider, relevant: true, surface: 'rest' });
    const boosted = (await narrow.search.search({ query: q, topK: 50, minScore: 0 })).results.map((hit) => hit.tool.name);
    assert.ok(boosted.includes(outsider), boosted.join(', '));
    const hidden = (await narrow.search.search({ query: q, topK: 50, minScore: 0, visible: (entry) => entry.tool.name !== outsider })).results;
    assert.ok(!hidden.some((hit) => hit.tool.name === outsider));
    assert.deepEqual(hidden.map((hit) => hit.tool.name), zeroShot, 'with the boosted tool hidden, the rest rank as before');
  });

  it('isolates scopes under isolation "key", and shares them under "global"', async () => {
    for (const isolation of ['key', 'global'] as const) {
      const config = loadConfig({}, { logLevel: 'silent', feedback: { isolation } });
      const scoped = await createEngine(fixtureTools(), { config, embedder });
      const before = await scoped.search.search({ query, topK: 10, minScore: 0 });
      const called = before.results[4]!.tool.name;
      for (let i = 0; i < 4; i++) await scoped.feedback!.record({ query, tool: called, relevant: true, scope: 'key-a', surface: 'rest' });
      const top = async (feedbackScope?: string) => (await scoped.search.search({ query, topK: 10, minScore: 0, feedbackScope })).results[0]!.tool.name;
      assert.equal(await top('key-a'), called, isolation);
      if (isolation === 'key') {
        assert.notEqual(await top('key-b'), called, 'another key does not learn from key-a');
        assert.notEqual(await top(undefined), called, 'callers without a key do not either');
      } else {
        assert.equal(await top('key-b'), called);
      }
    }
  });

  it('decays with the injected clock', async () => {
    let now = 50 * DAY_MS;
    const service = new FeedbackService(embedder, new MemoryFeedbackStore({ maxEvents: 10, maxAgeDays: 60 }), settings({ halfLifeDays: 7, maxAgeDays: 60, maxBoost: 1 }), undefined, () => now);
    await service.record({ query, tool: 'slack__post_message', relevant: true, surface: 'rest' });
    const vector = (await queryEmbedding(embedder, query))!;
    const fresh = service.boosts(vector)[0]!.score;
    assert.ok(fresh > 0.99, String(fresh));
    now += 7 * DAY_MS;
    assert.ok(Math.abs(service.boosts(vector)[0]!.score - fresh / 2) < 1e-6);
    now += 60 * DAY_MS;
    assert.deepEqual(service.boosts(vector), []);
  });

  it('eval replay turns labelled queries into events for the tools the catalog has', async () => {
    const fresh = await createEngine(fixtureTools(), { config: loadConfig({}, { logLevel: 'silent' }), embedder });
    const labelled = [
      { query: 'a', expected: ['slack__post_message', 'not_in_catalog'] },
      { query: 'b', expected: ['gmail__send_email'] },
      { query: 'c', expected: ['gmail__send_email'] },
    ];
    const { feedback, evaluation } = splitForFeedback(labelled);
    assert.deepEqual(feedback.map((q) => q.query), ['a', 'c']);
    assert.deepEqual(evaluation.map((q) => q.query), ['b']);
    assert.equal(await replayFeedback(fresh.feedback!, feedback, (name) => fresh.catalog.get(name) !== undefined), 2);
    assert.equal(fresh.feedback!.size, 2);
  });
});

describe('feedback capture', () => {
  let api: RunningRouter;
  let llm: StandInLlm;
  let client: Client;
  const feedback = () => api.router.feedback!;
  const vector = async (text: string) => (await queryEmbedding(api.router.embedder, text))!;
  const boosted = async (text: string) => feedback().boosts(await vector(text)).map((hit) => hit.name);

  before(async () => {
    llm = await startStandInLlm();
    api = await startRouter({
      upstreamLlmUrl: llm.url,
      mcp: { search: true, servers: { files: stdioFixtureServer() } },
    });
    await api.router.mcp.upstreams.settled();
    const put = await api.request('PUT', '/v1/catalog/sources/demo', { tools: fixtureTools() });
    assert.equal(put.status, 200);
    await api.indexed();
    ({ client } = await connectHttpClient(api.url));
  });
  after(async () => {
    await client?.close();
    await api?.close();
    await llm?.close();
  });

  describe('POST /v1/feedback', () => {
    it('records an event that boosts the tool for similar searches', async () => {
      const query = 'share the quarterly numbers with finance';
      const answer = await api.post('/v1/feedback', { query, tool: 'gmail__send_email' });
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
      assert.equal(answer.body.tool, 'gmail__send_email');
      assert.equal(answer.body.relevant, true);
      assert.ok(!Number.isNaN(Date.parse(answer.body.time)));
      // One event is a small boost (a quarter of the cap): the tool is in the top 20, not necessarily the top 10.
      const search = await api.post('/v1/tools/search', { query, top_k: 20, min_score: 0 });
      const hit = search.body.results.find((result: { name: string }) => result.name === 'gmail__send_email');
      assert.ok(hit?.scores.feedback > 0, JSON.stringify(search.body.results.map((r: any) => [r.name, r.scores])));
      const without = await api.post('/v1/tools/search', { query, top_k: 10, min_score: 0, weights: { feedback: 0 } });
      assert.equal(without.status, 200);
      assert.ok(without.body.results.every((result: any) => result.scores.feedback === undefined));
    });

    it('records relevant: false as negative evidence', async () => {
      const query = 'negative evidence about forecasts for rome';
      assert.equal((await api.post('/v1/feedback', { query, tool: 'weather__get_forecast', relevant: false })).status, 201);
      const boost = feedback().boosts(await vector(query)).find((hit) => hit.name === 'weather__get_forecast');
      assert.ok(boost && boost.score < 0);
    });

    it('answers 404 for an unknown tool and 400 for a bad body, recording nothing', async () => {
      const size = feedback().size;
      const unknown = await api.post('/v1/feedback', { query: 'x', tool: 'no_such_tool' });
      assert.equal(unknown.status, 404);
      assert.deepEqual(unknown.body, { error: { code: 'not_found', message: 'unknown tool "no_such_tool"' } });
      const cases: [unknown, RegExp][] = [
        [{ tool: 'gmail__send_email' }, /query: is required/],
        [{ query: '   ', tool: 'gmail__send_email' }, /query: must not be empty/],
        [{ query: 'x' }, /tool: is required/],
        [{ query: 'x', tool: 'gmail__send_email', relevant: 'yes' }, /relevant: must be true or false/],
        [{ query: 'x', tool: 'gmail__send_email', extra: 1 }, /extra/],
        ['[1]', /must be a JSON object/],
      ];
      for (const [body, message] of cases) {
        const answer = await api.post('/v1/feedback', body);
        assert.equal(answer.status, 400, JSON.stringify(body));
        assert.equal(answer.body.error.code, 'invalid_request');
        assert.match(answer.body.error.message, message);
      }
      assert.equal(feedback().size, size);
    });
  });

  describe('MCP session', () => {
    const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });
    const searchTools = async (query: string, topK = 1) => {
      const result = await call('search_tools', { query, top_k: topK });
      return (result.structuredContent as { tools: { name: string }[] }).tools.map((tool) => tool.name);
    };

    it('records a search_tools result followed by call_tool of a returned tool, once per search', async () => {
      const query = 'add two numbers together';
      assert.deepEqual(await searchTools(query), ['files__add']);
      const size = feedback().size;
      const result = await call('call_tool', { name: 'files__add', arguments: { a: 2, b: 3 } });
      assert.equal(textOf(result), '5');
      await eventually(() => feedback().size, (value) => value === size + 1, 10_000);
      assert.ok((await boosted(query)).includes('files__add'));
      // The same tool again after the same search is not new evidence; the next event is the direct call below.
      await call('call_tool', { name: 'files__add', arguments: { a: 1, b: 1 } });
      assert.deepEqual(await searchTools('echo this text back to me'), ['files__echo']);
      assert.equal(textOf(await call('files__echo', { text: 'hi' })), 'hi');
      await eventually(() => feedback().size, (value) => value === size + 2, 10_000);
      assert.ok((await boosted('echo this text back to me')).includes('files__echo'));
    });

    it('records nothing for a call of a tool no search of the session returned, or after a select: query', async () => {
      const size = feedback().size;
      await call('files__pid', {});
      assert.deepEqual(await searchTools('select:files__env'), ['files__env']);
      await call('call_tool', { name: 'files__env', arguments: { name: 'HOME' } });
      // A recorded call afterwards proves the earlier ones had their chance and recorded nothing.
      assert.deepEqual(await searchTools('wait some milliseconds before answering'), ['files__slow']);
      await call('files__slow', { ms: 1 });
      await eventually(() => feedback().size, (value) => value >= size + 1, 10_000);
      assert.equal(feedback().size, size + 1);
    });
  });

  describe('chat completions proxy', () => {
    const TOOLS = fixtureTools().map((tool: Tool) => ({
      type: 'function',
      function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
    }));
    const completions = () => `${api.url}/v1/chat/completions`;
    const user = (content: string) => ({ role: 'user', content });
    const toolCall = (id: string, name: string) => ({
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name, arguments: '{}' } }],
    });
    const result = (id: string) => ({ role: 'tool', tool_call_id: id, content: 'done' });

    it('records a call, in a later turn, of a tool the router kept, with the query it ranked with', async () => {
      const question = user('what is the weather forecast for Lisbon tomorrow');
      const first = await postJson(completions(), { model: 'm', messages: [question], tools: TOOLS }, { 'x-toolrouter-k': '3' });
      assert.equal(first.status, 200);
      const kept = (llm.received.at(-1)!.json.tools as any[]).map((tool) => tool.function.name);
      assert.ok(kept.includes('weather__get_forecast'), kept.join(', '));
      const size = feedback().size;
      const history = [question, toolCall('c1', 'weather__get_forecast'), result('c1')];
      assert.equal((await postJson(completions(), { model: 'm', messages: history, tools: TOOLS }, { 'x-toolrouter-k': '3' })).status, 200);
      await eventually(() => feedback().size, (value) => value === size + 1, 10_000);
      assert.ok((await boosted('what is the weather forecast for Lisbon tomorrow')).includes('weather__get_forecast'));
      // The next turn resends the same call: not counted twice.
      const later = [...history, { role: 'assistant', content: 'Sunny.' }, user('thanks, and send that by email to Ana')];
      assert.equal((await postJson(completions(), { model: 'm', messages: later, tools: TOOLS }, { 'x-toolrouter-k': '3' })).status, 200);
      const laterKept = (llm.received.at(-1)!.json.tools as any[]).map((tool) => tool.function.name);
      assert.ok(laterKept.includes('gmail__send_email'), laterKept.join(', '));
      // A call of a tool the router had dropped is not evidence for the ranking; the kept one is.
      const dropped = TOOLS.map((tool) => tool.function.name).find((name) => !laterKept.includes(name) && name.startsWith('kubernetes__'))!;
      const final = [...later, { role: 'assistant', content: null, tool_calls: [
        { id: 'c2', type: 'function', function: { name: dropped, arguments: '{}' } },
        { id: 'c3', type: 'function', function: { name: 'gmail__send_email', arguments: '{}' } },
      ] }, result('c2'), result('c3')];
      assert.equal((await postJson(completions(), { model: 'm', messages: final, tools: TOOLS }, { 'x-toolrouter-k': '3' })).status, 200);
      await eventually(() => feedback().size, (value) => value >= size + 2, 10_000);
      assert.equal(feedback().size, size + 2);
    });

    it('records Responses API calls too: a function_call item after the input the router ranked for', async () => {
      const responses = `${api.url}/v1/responses`;
      const functions = TOOLS.map((tool) => ({ type: 'function', ...tool.function }));
      const input = 'please create a calendar event for the team offsite on friday';
      const first = await postJson(responses, { model: 'm', instructions: 'You plan things.', input, tools: functions }, { 'x-toolrouter-k': '3' });
      assert.equal(first.status, 200, first.raw.toString());
      const kept = (llm.received.at(-1)!.json.tools as any[]).map((tool) => tool.name as string);
      const size = feedback().size;
      const next = [
        { role: 'user', content: [{ type: 'input_text', text: input }] },
        { type: 'reasoning', id: 'rs_1', summary: [] },
        { type: 'function_call', call_id: 'r1', name: kept[0], arguments: '{}' },
        { type: 'function_call_output', call_id: 'r1', output: 'created' },
      ];
      const second = await postJson(responses, { model: 'm', instructions: 'You plan things.', input: next, tools: functions }, { 'x-toolrouter-k': '3' });
      assert.equal(second.status, 200, second.raw.toString());
      await eventually(() => feedback().size, (value) => value === size + 1, 10_000);
      assert.ok((await boosted(input)).includes(kept[0]!));
    });

    it('does not learn from dry runs on /v1/tools/rewrite', async () => {
      const question = user('check the air quality in Berlin right now');
      const dry = await postJson(`${api.url}/v1/tools/rewrite`, { messages: [question], tools: TOOLS }, { 'x-toolrouter-k': '3' });
      assert.equal(dry.status, 200);
      const size = feedback().size;
      const history = [question, toolCall('d1', 'weather__get_air_quality'), result('d1')];
      assert.equal((await postJson(completions(), { model: 'm', messages: history, tools: TOOLS }, { 'x-toolrouter-k': '3' })).status, 200);
      // This request itself was ranked; its follow-up with a call proves capture ran, and the dry run left nothing.
      const kept = (llm.received.at(-1)!.json.tools as any[]).map((tool) => tool.function.name);
      const next = [...history, toolCall('d2', kept.find((name) => name !== 'weather__get_air_quality')!), result('d2')];
      assert.equal((await postJson(completions(), { model: 'm', messages: next, tools: TOOLS }, { 'x-toolrouter-k': '3' })).status, 200);
      await eventually(() => feedback().size, (value) => value >= size + 1, 10_000);
      assert.equal(feedback().size, size + 1);
    });
  });
});

describe('feedback and API keys (isolation: key)', () => {
  let api: RunningRouter;
  const query = 'tell the team that the release is out';
  const call = async (route: string, key: string | undefined, body: unknown) => {
    const response = await fetch(api.url + route, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { 'x-toolrouter-key': key } : {}) },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  const names = async (key: string | undefined) =>
    ((await call('/v1/tools/search', key, { query, top_k: 10, min_score: 0 })).body.results as { name: string }[]).map((hit) => hit.name);
  const newKey = async (body: Record<string, unknown> = {}) => (await call('/key/generate', undefined, body)).body.key as string;

  before(async () => {
    api = await startRouter({ feedback: { isolation: 'key' } });
    assert.equal((await api.request('PUT', '/v1/catalog/sources/demo', { tools: fixtureTools() })).status, 200);
    await api.indexed();
  });
  after(() => api?.close());

  it("boosts only the recording key's searches, and never past what a key may see", async () => {
    const [alice, bob] = [await newKey(), await newKey()];
    const zeroShot = await names(alice);
    const called = zeroShot[4]!;
    for (let i = 0; i < 4; i++) assert.equal((await call('/v1/feedback', alice, { query, tool: called })).status, 201);
    assert.equal((await names(alice))[0], called);
    assert.deepEqual(await names(bob), zeroShot, "bob's ranking is untouched");
    assert.deepEqual(await names(undefined), zeroShot, 'so is an unkeyed caller');
    // A key that may not see the tool can neither report it nor be shown it.
    const narrow = await newKey({ allowed_tools: zeroShot.filter((name) => name !== called) });
    const refused = await call('/v1/feedback', narrow, { query, tool: called });
    assert.equal(refused.status, 404);
    assert.equal(refused.body.error.message, `unknown tool "${called}"`);
    assert.ok(!(await names(narrow)).includes(called));
  });
});

describe('feedback disabled', () => {
  it('records nothing and says so on POST /v1/feedback', async () => {
    const api = await startRouter({ feedback: { enabled: false } });
    try {
      assert.equal(api.router.feedback, undefined);
      assert.equal((await api.request('PUT', '/v1/catalog/sources/demo', { tools: fixtureTools() })).status, 200);
      await api.indexed();
      const answer = await api.post('/v1/feedback', { query: 'send an email', tool: 'gmail__send_email' });
      assert.equal(answer.status, 404);
      assert.match(answer.body.error.message, /feedback is disabled/);
      const search = await api.post('/v1/tools/search', { query: 'send an email', top_k: 3, weights: { feedback: 1 } });
      assert.equal(search.status, 200);
      assert.ok(search.body.results.every((hit: any) => hit.scores.feedback === undefined));
    } finally {
      await api.close();
    }
  });
});
