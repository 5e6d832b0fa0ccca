import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { stdioFixtureServer, waitFor } from '../helpers/mcp.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/** Reproducible by default; FUZZ_SEED=<n> replays another run (fast-check prints the failing seed). */
const seed = Number(process.env.FUZZ_SEED ?? 20261121);
const runs = Number(process.env.FUZZ_RUNS ?? 40);

const internalTools = [
  { name: 'payroll_export', description: 'Export the payroll ledger with every salary', inputSchema: { type: 'object', properties: { month: { type: 'string' } } } },
];
/** Names only the admin may see; a reply may repeat one only if the request itself named it (an error quoting it). */
const hiddenNames = /payroll_export|vault__[a-z_]+/g;

/** JSON-ish values, including the shapes endpoints expect with wrong types inside. */
const jsonValue = fc.jsonValue({ maxDepth: 4 });
const almostValidBody = fc.record(
  {
    query: fc.oneof(fc.string(), fc.constant('payroll ledger'), fc.constant('select:payroll_export'), fc.constant('regex:payroll|(a+)+$'), jsonValue),
    top_k: fc.oneof(fc.integer(), fc.double(), fc.string(), fc.constant(1e9)),
    mode: fc.oneof(fc.constantFrom('hybrid', 'bm25', 'vector', 'regex', 'nope'), jsonValue),
    weights: fc.oneof(jsonValue, fc.record({ bm25: fc.double(), vector: fc.double() })),
    name: fc.oneof(fc.constantFrom('files__echo', 'vault__echo', 'payroll_export', 'search_tools'), fc.string()),
    arguments: jsonValue,
    tools: fc.oneof(jsonValue, fc.array(fc.record({ name: fc.string(), inputSchema: jsonValue }))),
    keys: jsonValue,
    messages: jsonValue,
    input: jsonValue,
    model: fc.string(),
  },
  { requiredKeys: [] },
);
/** Well-formed requests whose words name hidden tools, per endpoint: what a leak would answer. */
const hostileQuery = fc.constantFrom('payroll ledger salary', 'export the payroll', 'select:payroll_export,vault__echo', 'payroll|vault', 'vault echo text', 'echo');
const hiddenName = fc.constantFrom('files__echo', 'vault__echo', 'payroll_export');
const validBodies: Record<string, fc.Arbitrary<unknown>> = {
  '/v1/tools/search': fc.record({ query: hostileQuery, top_k: fc.integer({ min: 1, max: 50 }), mode: fc.constantFrom('hybrid', 'bm25', 'vector', 'regex') }),
  '/mcp-rest/tools/call': fc.record({ name: hiddenName, arguments: fc.constant({ text: 'hi' }) }),
  '/v1/tools/rewrite': hostileQuery.map((query) => ({ model: 'gpt-test', messages: [{ role: 'user', content: query }], tools: [{ type: 'function', function: { name: 'a', parameters: { type: 'object' } } }] })),
  '/v1/feedback': fc.record({ query: hostileQuery, tool: hiddenName, relevant: fc.boolean() }),
  '/mcp': fc.record({ jsonrpc: fc.constant('2.0'), id: fc.nat(), method: fc.constantFrom('initialize', 'tools/list', 'tools/call'), params: fc.record({ query: hostileQuery, name: hiddenName }) }),
};
const validBody = (route: string) => (validBodies[route] ?? almostValidBody).map((value) => JSON.stringify(value));
const rawBody = (route: string) => fc.oneof(
  validBody(route),
  jsonValue.map((value) => JSON.stringify(value)),
  almostValidBody.map((value) => JSON.stringify(value)),
  fc.string(),
  fc.constantFrom('{', '{"query":', '[]', 'null', '"string"', '{"query": "\u0000"}', '\uFEFF{}', '{"a":1,"a":2}', '['.repeat(50_000)),
);

/** Every JSON endpoint, with the key a real caller would use there. */
const endpoints: { method: string; route: string; admin?: boolean }[] = [
  { method: 'POST', route: '/v1/tools/search' },
  { method: 'POST', route: '/mcp-rest/tools/call' },
  { method: 'POST', route: '/v1/tools/rewrite' },
  { method: 'POST', route: '/v1/chat/completions' },
  { method: 'POST', route: '/v1/responses' },
  { method: 'POST', route: '/v1/feedback' },
  { method: 'POST', route: '/mcp' },
  { method: 'PUT', route: '/v1/catalog/sources/fuzz', admin: true },
  { method: 'POST', route: '/key/generate', admin: true },
  { method: 'POST', route: '/key/delete', admin: true },
  { method: 'POST', route: '/key/update', admin: true },
  { method: 'POST', route: '/v1/eval', admin: true },
  { method: 'PUT', route: '/v1/search/settings', admin: true },
];

describe('hostile input', () => {
  let api: RunningRouter;
  let key: string;

  before(async () => {
    api = await startRouter({
      adminKey: ADMIN_KEY,
      // The fuzzer sends many bad keys from one address; this suite is about bodies, not that limit.
      security: { authFailuresPerIpPerMinute: 0 },
      catalog: { sources: { demo: fixtureTools(), internal: internalTools } },
      mcp: { search: true, servers: { files: stdioFixtureServer(), vault: stdioFixtureServer() } },
    });
    await waitFor('upstreams connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 20_000);
    await api.indexed();
    key = (await generateKey(api.url, { allowed_servers: ['files', 'demo'] })).key;
  });

  after(async () => {
    await api.close();
  });

  for (const endpoint of endpoints) {
    test(`fuzz ${endpoint.method} ${endpoint.route}: no 5xx from the service, no crash, nothing outside the key`, async () => {
      await fc.assert(
        fc.asyncProperty(rawBody(endpoint.route), fc.constantFrom('application/json', 'text/plain', 'application/json; charset=latin1'), async (body, contentType) => {
          const response = await fetch(api.url + endpoint.route, {
            method: endpoint.method,
            headers: {
              authorization: `Bearer ${endpoint.admin ? ADMIN_KEY : key}`,
              'content-type': contentType,
              accept: 'application/json, text/event-stream',
            },
            body,
          });
          const text = await response.text();
          // 503 is allowed only where it is the documented answer: no upstream LLM configured for the proxies.
          const allowed503 = response.status === 503 && /upstream_not_configured|No upstream LLM/.test(text);
          assert.ok(response.status < 500 || allowed503, `${endpoint.route} answered ${response.status}: ${text.slice(0, 300)} for ${body.slice(0, 200)}`);
          if (!endpoint.admin) {
            const leaked = [...text.matchAll(hiddenNames)].map((match) => match[0]).filter((name) => !body.includes(name));
            assert.deepEqual(leaked, [], `${endpoint.route} leaked hidden tools: ${text.slice(0, 300)}`);
          }
        }),
        { seed, numRuns: runs },
      );
      assert.equal((await call(api.url, 'GET', '/health')).status, 200, 'still serving');
    });
  }

  test('a restricted key is never shown hidden tools, even when its query names them', async () => {
    for (const query of ['payroll ledger salary', 'select:payroll_export,vault__echo', 'vault echo', 'payroll|vault']) {
      for (const mode of ['hybrid', 'bm25', 'vector', 'regex']) {
        const reply = await call(api.url, 'POST', '/v1/tools/search', { key, body: { query, mode, top_k: 50 } });
        assert.equal(reply.status, 200);
        const names: string[] = reply.body.results.map((result: { name: string }) => result.name);
        assert.deepEqual(names.filter((name) => /payroll|vault__/.test(name)), [], `${mode} "${query}" leaked`);
      }
    }
  });

  test('oversized queries, top_k and bodies get clear errors or caps', async () => {
    const longQuery = await call(api.url, 'POST', '/v1/tools/search', { key, body: { query: 'x'.repeat(2_001) } });
    assert.equal(longQuery.status, 400);
    assert.match(longQuery.body.error.message, /at most 2000 characters/);
    const hugeTopK = await call(api.url, 'POST', '/v1/tools/search', { key, body: { query: 'send a message', top_k: 1_000_000 } });
    assert.equal(hugeTopK.status, 200);
    assert.ok(hugeTopK.body.results.length <= 50, 'top_k is capped at search.maxTopK');
    const pathological = await call(api.url, 'POST', '/v1/tools/search', { key, body: { query: '(a+)+$', mode: 'regex' } });
    assert.equal(pathological.status, 200, 'RE2 runs backtracking-prone patterns in linear time');
    const badArguments = await call(api.url, 'POST', '/mcp-rest/tools/call', { key, body: { name: 'files__add', arguments: { a: 'one', b: 2 } } });
    assert.equal(badArguments.status, 400);
    assert.match(badArguments.body.error.message, /invalid arguments for "files__add"/);
  });
});

describe('body size limit', () => {
  test('a body over the limit is a 413 and changes nothing', async () => {
    const api = await startRouter({ adminKey: ADMIN_KEY, bodyLimit: '2kb', catalog: { sources: { demo: fixtureTools().slice(0, 3) } } });
    try {
      const tools = fixtureTools();
      const reply = await call(api.url, 'PUT', '/v1/catalog/sources/demo', { key: ADMIN_KEY, body: { tools } });
      assert.equal(reply.status, 413);
      assert.equal(reply.body.error.code, 'payload_too_large');
      assert.equal(api.router.catalog.size, 3);
      // Refused before the body is read at all when there is no key.
      assert.equal((await call(api.url, 'PUT', '/v1/catalog/sources/demo', { body: { tools } })).status, 401);
    } finally {
      await api.close();
    }
  });
});

describe('large bodies (parsed in slices)', () => {
  test('a 5 MB catalog is accepted; malformed, too deep or over the limit, it gets the same errors as a small body', async () => {
    const api = await startRouter({ adminKey: ADMIN_KEY, bodyLimit: '8mb', catalog: { sources: { demo: fixtureTools().slice(0, 3) } } });
    const put = (body: string) =>
      fetch(`${api.url}/v1/catalog/sources/large`, { method: 'PUT', headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' }, body }).then(async (reply) => ({
        status: reply.status,
        body: (await reply.json()) as { tools?: number; error?: { code: string } },
      }));
    try {
      const tools = syntheticTools(20_000, 'large');
      const text = JSON.stringify({ tools });
      assert.ok(text.length > 4 << 20 && text.length < 8 << 20, `the body is ${text.length} bytes`);
      const malformed = await put(text.replace('}]', '},]'));
      assert.equal(malformed.status, 400);
      assert.equal(malformed.body.error?.code, 'invalid_json');
      const deep = await put(text.replace('"inputSchema":', `"deep":${'['.repeat(200)}${']'.repeat(200)},"inputSchema":`));
      assert.equal(deep.status, 400);
      assert.equal(deep.body.error?.code, 'json_too_deep');
      const over = await put(JSON.stringify({ tools: [...tools, ...syntheticTools(20_000, 'more')] }));
      assert.equal(over.status, 413);
      assert.equal(api.router.catalog.size, 3);
      const accepted = await put(text);
      assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
      assert.equal(accepted.body.tools, 20_000);
      assert.equal(api.router.catalog.get(tools[19_999]!.name)?.tool.description, tools[19_999]!.description);
    } finally {
      await api.close();
    }
  });
});

describe('rate limits', () => {
  test('per key: 429 with Retry-After once the key\'s rpm_limit is used, other keys unaffected', async () => {
    const api = await startRouter({ adminKey: ADMIN_KEY, catalog: { sources: { demo: fixtureTools() } } });
    try {
      await api.indexed();
      const limited = await generateKey(api.url, { rpm_limit: 3 });
      const other = await generateKey(api.url, {});
      for (let i = 0; i < 3; i++) assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: limited.key })).status, 200);
      const refused = await call(api.url, 'POST', '/v1/tools/search', { key: limited.key, body: { query: 'send email' } });
      assert.equal(refused.status, 429);
      assert.equal(refused.body.error.code, 'rate_limited');
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
      // The MCP face is behind the same check.
      const mcp = await call(api.url, 'POST', '/mcp', { key: limited.key, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} } });
      assert.equal(mcp.status, 429);
      assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: other.key })).status, 200);
    } finally {
      await api.close();
    }
  });

  test('per client address, and for repeated failed keys', async () => {
    const api = await startRouter({ adminKey: ADMIN_KEY, security: { perIpPerMinute: 5, authFailuresPerIpPerMinute: 0 } });
    try {
      for (let i = 0; i < 5; i++) assert.notEqual((await call(api.url, 'GET', '/v1/catalog', { key: ADMIN_KEY })).status, 429);
      const refused = await call(api.url, 'GET', '/v1/catalog', { key: ADMIN_KEY });
      assert.equal(refused.status, 429);
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      assert.equal((await call(api.url, 'GET', '/health')).status, 200, 'probes are not limited');
    } finally {
      await api.close();
    }

    const guarded = await startRouter({ adminKey: ADMIN_KEY, security: { authFailuresPerIpPerMinute: 3 } });
    try {
      const virtual = await generateKey(guarded.url, {});
      for (let i = 0; i < 3; i++) assert.equal((await call(guarded.url, 'GET', '/v1/catalog', { key: `sk-tr-guess-${i}` })).status, 401);
      const blocked = await call(guarded.url, 'GET', '/v1/catalog', { key: 'sk-tr-guess-final' });
      assert.equal(blocked.status, 429);
      // Even a right virtual key waits out the minute from that address: guessing must not pay off.
      assert.equal((await call(guarded.url, 'GET', '/v1/catalog', { key: virtual.key })).status, 429);
      // The admin key is never locked out (issue 21, case 9): others' bad keys from a shared address must not stop it.
      assert.equal((await call(guarded.url, 'GET', '/v1/catalog', { key: ADMIN_KEY })).status, 200);
    } finally {
      await guarded.close();
    }
  });
});
