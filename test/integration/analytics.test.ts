import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListToolsResultSchema } from '@modelcontextprotocol/sdk/types.js';
import OpenAI from 'openai';
import type { Tool } from '../../src/catalog/types.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { textOf } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';

/** @modelcontextprotocol/server-everything from npm, over stdio, as the upstream agents search and call. */
const EVERYTHING = { command: process.execPath, args: [path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'], cwd: REPO_ROOT };

interface LoggedSearch {
  id: string;
  time: string;
  surface: string;
  key?: string;
  query: string;
  results: { name: string; score: number }[];
  matched: number;
  abstained: boolean;
  called?: string;
  ms: number;
}

/**
 * The search log end to end: real MCP clients of both SDKs (2025-11-25 sessions and stateless 2026-07-28) search and call
 * server-everything's tools through toolrouter with two keys; the admin and each key read the log and summary back;
 * traffic labels are evaluated like the same labels sent as a file.
 */
describe('search analytics over real MCP clients and server-everything', () => {
  let api: RunningRouter;
  let alice: { key: string; key_id: string };
  let bob: { key: string; key_id: string };
  let legacy: Client;
  let modern: ClientV2;

  const searches = async (key: string, query = '') => call(api.url, 'GET', `/v1/analytics/searches${query}`, { key });
  const flush = () => api.router.analytics!.flush();

  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, mcp: { search: true, codeMode: true, callTimeoutMs: 30_000, servers: { every: EVERYTHING } } });
    await api.router.mcp.upstreams.settled();
    await api.indexed();
    alice = await generateKey(api.url, { key_alias: 'alice' });
    bob = await generateKey(api.url, { key_alias: 'bob' });
    legacy = new Client({ name: 'analytics-legacy', version: '1.0.0' });
    await legacy.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${alice.key}` } } }));
    modern = new ClientV2({ name: 'analytics-modern', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await modern.connect(new HttpTransportV2(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${bob.key}` } } }));
  });

  after(async () => {
    await legacy?.close().catch(() => {});
    await modern?.close().catch(() => {});
    await api?.close();
  });

  it('logs each search with its results and the tool then called, on both revisions', async () => {
    // 2025-11-25 session (alice): search, then call a found tool through call_tool.
    const found: any = await legacy.callTool({ name: 'search_tools', arguments: { query: 'add two numbers and return their sum' } });
    const names = (found.structuredContent.tools as { name: string }[]).map((tool) => tool.name);
    assert.ok(names.includes('every__get-sum'), names.join(', '));
    const sum = await legacy.callTool({ name: 'call_tool', arguments: { name: 'every__get-sum', arguments: { a: 2, b: 3 } } });
    assert.match(textOf(sum), /5/);
    // A search nothing comes of.
    await legacy.callTool({ name: 'search_tools', arguments: { query: 'book a table at an italian restaurant for friday' } });
    // A SEP-1821 listing with a query.
    await legacy.request({ method: 'tools/list', params: { query: 'echo a message back' } as { cursor?: string } }, ListToolsResultSchema);

    // 2026-07-28, stateless (bob): search, then call the found tool directly (credited through the key's recent searches).
    const echoed: any = await modern.callTool({ name: 'search_tools', arguments: { query: 'echo back the input message' } });
    assert.ok((echoed.structuredContent.tools as { name: string }[]).some((tool) => tool.name === 'every__echo'));
    assert.match(textOf(await modern.callTool({ name: 'every__echo', arguments: { message: 'hello analytics' } })), /hello analytics/);
    await flush();

    const admin = await searches(ADMIN_KEY, '?limit=50');
    assert.equal(admin.status, 200, JSON.stringify(admin.body));
    const log = admin.body.searches as LoggedSearch[];
    const byQuery = new Map(log.map((search) => [search.query, search]));
    const sumSearch = byQuery.get('add two numbers and return their sum')!;
    assert.equal(sumSearch.surface, 'mcp');
    assert.equal(sumSearch.key, alice.key_id);
    assert.equal(sumSearch.called, 'every__get-sum', JSON.stringify(sumSearch));
    assert.equal(sumSearch.abstained, false);
    assert.ok(sumSearch.results.some((result) => result.name === 'every__get-sum' && result.score > 0 && result.score <= 1));
    assert.ok(sumSearch.matched >= 1 && sumSearch.ms >= 0);
    assert.ok(!Number.isNaN(Date.parse(sumSearch.time)));
    const echoSearch = byQuery.get('echo back the input message')!;
    assert.equal(echoSearch.key, bob.key_id);
    assert.equal(echoSearch.called, 'every__echo', JSON.stringify(echoSearch));
    assert.equal(byQuery.get('echo a message back')?.surface, 'mcp_list');
    assert.equal(byQuery.get('book a table at an italian restaurant for friday')?.called, undefined);
    // Newest first.
    const times = log.map((search) => Date.parse(search.time));
    assert.deepEqual(times, [...times].sort((a, b) => b - a));
    // Secrets never reach the log.
    assert.doesNotMatch(JSON.stringify(log), new RegExp(`${alice.key}|${bob.key}|${ADMIN_KEY}`));
  });

  it('logs search_tools inside code mode as its own surface, with the call the code then made', async () => {
    const ran: any = await legacy.callTool({
      name: 'execute',
      arguments: { code: 'const found = await search_tools("print the environment variables"); const env = await call_tool("every__get-env", {}); return found.map((tool) => tool.name);' },
    });
    assert.equal(ran.isError, undefined, JSON.stringify(ran));
    await flush();
    const code = (await searches(ADMIN_KEY, '?surface=code')).body.searches as LoggedSearch[];
    assert.equal(code.length, 1, JSON.stringify(code));
    assert.equal(code[0]!.query, 'print the environment variables');
    assert.equal(code[0]!.key, alice.key_id);
    assert.ok(code[0]!.results.some((result) => result.name === 'every__get-env'), JSON.stringify(code[0]));
    assert.equal(code[0]!.called, 'every__get-env');
  });

  it('the summary counts answered searches and lists the search nothing came of', async () => {
    const summary = await call(api.url, 'GET', '/v1/analytics/summary', { key: ADMIN_KEY });
    assert.equal(summary.status, 200, JSON.stringify(summary.body));
    assert.ok(summary.body.searches >= 4);
    assert.equal(summary.body.answered, 3);
    assert.equal(summary.body.searches, summary.body.answered + summary.body.abstained + summary.body.unanswered);
    assert.ok(summary.body.misses.some((miss: { query: string; count: number }) => miss.query === 'book a table at an italian restaurant for friday' && miss.count === 1), JSON.stringify(summary.body.misses));
    assert.deepEqual(
      summary.body.top_tools.map((tool: { name: string }) => tool.name).sort(),
      ['every__echo', 'every__get-env', 'every__get-sum'],
    );
    // Tools no search returned: server-everything has more tools than these few searches found.
    assert.ok(summary.body.unused_tools.length > 0 && !summary.body.unused_tools.includes('every__get-sum'));
  });

  it('each key sees only its own searches; the admin may narrow by key', async () => {
    const own = await searches(alice.key);
    assert.equal(own.status, 200);
    assert.ok(own.body.searches.length >= 4);
    assert.ok(own.body.searches.every((search: LoggedSearch) => search.key === alice.key_id));
    const bobs = await searches(bob.key);
    assert.ok(bobs.body.searches.length >= 1);
    assert.ok(bobs.body.searches.every((search: LoggedSearch) => search.key === bob.key_id));
    assert.equal((await searches(alice.key, `?key=${bob.key_id}`)).status, 403);
    const narrowed = await searches(ADMIN_KEY, `?key=${bob.key_id}`);
    assert.deepEqual(narrowed.body.searches.map((search: LoggedSearch) => search.id), bobs.body.searches.map((search: LoggedSearch) => search.id));
    const bobSummary = await call(api.url, 'GET', '/v1/analytics/summary', { key: bob.key });
    assert.equal(bobSummary.body.searches, bobs.body.searches.length);
    assert.equal((await call(api.url, 'GET', '/v1/analytics/searches')).status, 401);
  });

  it('filters by surface and since, and answers bad parameters with a 400 naming them', async () => {
    const listings = await searches(ADMIN_KEY, '?surface=mcp_list');
    assert.ok(listings.body.searches.length >= 1);
    assert.ok(listings.body.searches.every((search: LoggedSearch) => search.surface === 'mcp_list'));
    const future = await searches(ADMIN_KEY, `?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`);
    assert.deepEqual(future.body.searches, []);
    assert.equal((await searches(ADMIN_KEY, '?limit=1')).body.searches.length, 1);
    for (const [query, field] of [
      ['?limit=0', 'limit'],
      ['?limit=ten', 'limit'],
      ['?surface=smoke-signals', 'surface'],
      ['?since=yesterday-ish', 'since'],
      ['?colour=blue', 'colour'],
    ] as const) {
      const bad = await searches(ADMIN_KEY, query);
      assert.equal(bad.status, 400, query);
      assert.equal(bad.body.error.code, 'invalid_request');
      assert.match(bad.body.error.message, new RegExp(field), query);
    }
    const badSummary = await call(api.url, 'GET', '/v1/analytics/summary?since=never', { key: ADMIN_KEY });
    assert.equal(badSummary.status, 400);
    // A number past what a Date holds is refused alike by every analytics route (the summary used to answer a 500).
    for (const since of ['9999999999999999', '8640000000000001']) {
      for (const route of ['/v1/analytics/searches', '/v1/analytics/summary']) {
        const bad = await call(api.url, 'GET', `${route}?since=${since}`, { key: ADMIN_KEY });
        assert.equal(bad.status, 400, `${route} ${since}`);
        assert.equal(bad.body.error.code, 'invalid_request');
        assert.match(bad.body.error.message, /since/);
      }
      const evalBad = await call(api.url, 'POST', '/v1/eval', { key: ADMIN_KEY, body: { from: 'traffic', since: Number(since) } });
      assert.equal(evalBad.status, 400, `eval ${since}`);
    }
    const farSummary = await call(api.url, 'GET', '/v1/analytics/summary?since=8640000000000000', { key: ADMIN_KEY });
    assert.equal(farSummary.status, 200);
    assert.equal(farSummary.body.searches, 0);
  });

  it('counts outcomes in toolrouter_search_outcomes_total', async () => {
    const metrics = await call(api.url, 'GET', '/metrics', { key: ADMIN_KEY });
    assert.match(metrics.body, /toolrouter_search_outcomes_total\{surface="mcp",outcome="answered"\} 2/);
  });

  it('POST /v1/eval {from: "traffic"} evaluates the grid on the traffic labels, as the same labels given as a file', async () => {
    const traffic = await call(api.url, 'POST', '/v1/eval', { key: ADMIN_KEY, body: { from: 'traffic', grid: { steps: 4 } } });
    assert.equal(traffic.status, 200, JSON.stringify(traffic.body));
    assert.equal(traffic.body.source.from, 'traffic');
    assert.equal(traffic.body.source.labels, 3);
    assert.ok(Date.parse(traffic.body.source.first) <= Date.parse(traffic.body.source.last));
    const file = await call(api.url, 'POST', '/v1/eval', {
      key: ADMIN_KEY,
      body: {
        queries: [
          { query: 'add two numbers and return their sum', expected: ['every__get-sum'] },
          { query: 'echo back the input message', expected: ['every__echo'] },
          { query: 'print the environment variables', expected: ['every__get-env'] },
        ],
        grid: { steps: 4 },
      },
    });
    assert.equal(file.status, 200, JSON.stringify(file.body));
    assert.deepEqual(traffic.body.rows, file.body.rows);
    assert.deepEqual(traffic.body.best, file.body.best);
    assert.deepEqual(traffic.body.min_scores, file.body.min_scores);
    assert.equal(traffic.body.rows.length, 10);
    assert.equal(traffic.body.min_scores[0].min_score, 0);
    // Nothing answered after now: a clear 400, not an empty evaluation.
    const none = await call(api.url, 'POST', '/v1/eval', { key: ADMIN_KEY, body: { from: 'traffic', since: new Date(Date.now() + 60_000).toISOString() } });
    assert.equal(none.status, 400);
    assert.match(none.body.error.message, /no answered search/);
    assert.equal((await call(api.url, 'POST', '/v1/eval', { key: alice.key, body: { from: 'traffic' } })).status, 403);
  });

  it('`toolrouter tune --from-traffic` prints the same evaluation from the running service', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'src/cli.ts'), 'tune', '--from-traffic', '--url', api.url, '--steps', '4'], {
      env: { ...process.env, ADMIN_KEY },
      timeout: 60_000,
    });
    assert.match(stdout, /traffic: 3 labels \(answered searches\) from \S+ to \S+/);
    const file = await call(api.url, 'POST', '/v1/eval', { key: ADMIN_KEY, body: { from: 'traffic', grid: { steps: 4 } } });
    const best = file.body.best as { fusion: string; weights: { bm25: number; vector: number } };
    assert.ok(stdout.includes(`best: fusion=${best.fusion} weights={bm25: ${best.weights.bm25}, vector: ${best.weights.vector}}`), stdout);
  });
});

describe('search analytics on the chat proxy (the openai client, feedback off)', () => {
  let api: RunningRouter;
  let llm: StandInLlm;
  const TOOLS = fixtureTools().map((tool: Tool) => ({
    type: 'function' as const,
    function: { name: tool.name, description: tool.description ?? '', parameters: tool.inputSchema as Record<string, unknown> },
  }));

  before(async () => {
    llm = await startStandInLlm();
    // Feedback off: the proxy still pairs a ranked turn with the call that follows it, for the log alone.
    api = await startRouter({ upstreamLlmUrl: llm.url, feedback: { enabled: false }, chat: { k: 3 }, search: { activation: { maxTools: 0, maxTokens: 0 } } });
  });

  after(async () => {
    await api?.close();
    await llm?.close();
  });

  it('logs the ranking of each request and credits the tool the model then called', async () => {
    const client = new OpenAI({ baseURL: `${api.url}/v1`, apiKey: 'provider-key', maxRetries: 0 });
    const question = { role: 'user' as const, content: 'what is the weather forecast for Lisbon tomorrow' };
    await client.chat.completions.create({ model: 'm', messages: [question], tools: TOOLS });
    const kept = (llm.received.at(-1)!.json.tools as { function: { name: string } }[]).map((tool) => tool.function.name);
    assert.ok(kept.includes('weather__get_forecast'), kept.join(', '));
    await client.chat.completions.create({
      model: 'm',
      messages: [
        question,
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather__get_forecast', arguments: '{"city":"Lisbon"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
      ],
      tools: TOOLS,
    });
    await api.router.analytics!.flush();
    const logged = (await api.request('GET', '/v1/analytics/searches?surface=proxy')).body.searches as LoggedSearch[];
    assert.equal(logged.length, 2, 'one ranking per request');
    const first = logged.at(-1)!;
    // The proxy's query is built from the recent user turns (the last one weighs double): the log keeps it as ranked.
    assert.match(first.query, /^what is the weather forecast for Lisbon tomorrow/);
    assert.equal(first.results.length, 3);
    assert.equal(first.called, 'weather__get_forecast', JSON.stringify(logged));
    assert.equal(first.key, undefined, 'an open service has no keys');
    assert.equal(api.router.feedback, undefined);
  });

  it('logs REST searches, and the summary and traffic evaluation read them', async () => {
    assert.equal((await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() })).status, 200);
    await api.indexed();
    const rest = await api.post('/v1/tools/search', { query: 'translate ancient sumerian poetry into klingon', min_score: 0.99 });
    assert.equal(rest.status, 200);
    assert.deepEqual(rest.body.results, []);
    await api.router.analytics!.flush();
    const [abstained] = (await api.request('GET', '/v1/analytics/searches?surface=rest&limit=1')).body.searches as LoggedSearch[];
    assert.equal(abstained!.abstained, true);
    const summary = (await api.request('GET', '/v1/analytics/summary')).body;
    assert.ok(summary.abstained >= 1);
    assert.ok(summary.misses.some((miss: { query: string }) => miss.query === 'translate ancient sumerian poetry into klingon'));
    const traffic = await api.post('/v1/eval', { from: 'traffic' });
    assert.equal(traffic.status, 200, JSON.stringify(traffic.body));
    assert.equal(traffic.body.source.labels, 1);
  });
});
