import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { loadConfig } from '../../src/config/config.js';
import { createToolrouter, listen } from '../../src/server.js';
import { ADMIN_KEY, call, generateKey, mcpClientWithKey } from '../helpers/keys.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/** A static source no test key may see: its names and words must never come back to them. */
const internalTools = [
  { name: 'payroll_export', description: 'Export the payroll ledger with every salary as a spreadsheet', inputSchema: { type: 'object', properties: { month: { type: 'string' } } } },
  { name: 'payroll_adjust', description: 'Adjust the salary of an employee in the payroll ledger', inputSchema: { type: 'object', properties: { employee: { type: 'string' } } } },
];
const isHidden = (name: string) => name.startsWith('vault__') || name.startsWith('payroll');

/** call_tool's target is an argument: one the key may not use is a failed call (isError) the model reads, not a protocol error. */
async function expectToolRefusal(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  const result = (await promise) as { isError?: boolean; content: { type: string; text: string }[] };
  assert.equal(result.isError, true, JSON.stringify(result));
  assert.match(result.content[0]!.text, /not available to this key/);
  assert.match(result.content[0]!.text, pattern);
}

async function expectMcpError(promise: Promise<unknown>, code: number, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof McpError, `expected an McpError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.match(error.message, pattern);
    return true;
  });
}

describe('API keys and what each key sees', () => {
  let api: RunningRouter;
  let filesKey: { key: string; key_id: string };
  let echoKey: { key: string; key_id: string };
  let listOnlyKey: { key: string; key_id: string };
  const clients: Client[] = [];

  before(async () => {
    api = await startRouter({
      adminKey: ADMIN_KEY,
      // `bulk` makes the catalog larger than a search's candidate list, as real multi-tenant catalogs are.
      catalog: { sources: { demo: fixtureTools(), internal: internalTools, bulk: syntheticTools(300, 'bulk') } },
      mcp: { search: true, servers: { files: stdioFixtureServer(), vault: stdioFixtureServer() } },
    });
    await waitFor('both upstreams connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 20_000);
    await api.indexed();
    filesKey = await generateKey(api.url, { key_alias: 'files', allowed_servers: ['files', 'demo'] });
    echoKey = await generateKey(api.url, { allowed_tools: ['files__echo'] });
    listOnlyKey = await generateKey(api.url, { allowed_servers: ['files'], tool_search_enabled: false });
  });

  after(async () => {
    for (const client of clients) await client.close().catch(() => {});
    await api.close();
  });

  test('without a key only the probes answer; a wrong key is a 401', async () => {
    assert.equal((await call(api.url, 'GET', '/health')).status, 200);
    assert.equal((await call(api.url, 'GET', '/ready')).status, 200);
    const missing = await call(api.url, 'POST', '/v1/tools/search', { body: { query: 'send an email' } });
    assert.equal(missing.status, 401);
    assert.equal(missing.body.error.code, 'unauthorized');
    assert.equal((await call(api.url, 'GET', '/v1/catalog')).status, 401);
    assert.equal((await call(api.url, 'POST', '/mcp', { body: {} })).status, 401);
    const wrong = await call(api.url, 'POST', '/v1/tools/search', { key: 'sk-tr-not-a-real-key', body: { query: 'send an email' } });
    assert.equal(wrong.status, 401);
    assert.match(wrong.body.error.message, /invalid API key/);
    // The same key in x-toolrouter-key works like the Bearer form.
    const viaHeader = await call(api.url, 'POST', '/v1/tools/search', { headers: { 'x-toolrouter-key': filesKey.key }, body: { query: 'send an email' } });
    assert.equal(viaHeader.status, 200);
  });

  test('only the admin key manages keys, sources, the index and metrics', async () => {
    for (const [method, route, body] of [
      ['POST', '/key/generate', {}],
      ['GET', '/key/list', undefined],
      ['GET', `/key/info?key=${filesKey.key_id}`, undefined],
      ['POST', '/key/delete', { keys: [echoKey.key_id] }],
      ['POST', '/key/update', { key: echoKey.key_id, allowed_servers: null }],
      ['PUT', '/v1/catalog/sources/extra', { tools: [] }],
      ['DELETE', '/v1/catalog/sources/demo', undefined],
      ['POST', '/v1/index/rebuild', undefined],
      ['GET', '/metrics', undefined],
      ['PUT', '/v1/search/settings', { weights: { bm25: 1, vector: 0 } }],
      ['DELETE', '/v1/search/settings', undefined],
      ['POST', '/v1/eval', { queries: [{ query: 'echo', expected: ['files__echo'] }] }],
    ] as const) {
      const reply = await call(api.url, method, route, { key: filesKey.key, body });
      assert.equal(reply.status, 403, `${method} ${route} → ${reply.status}`);
      assert.equal(reply.body.error.code, 'forbidden');
    }
    assert.equal((await call(api.url, 'GET', '/metrics', { key: ADMIN_KEY })).status, 200);
    // Nothing was deleted by the refused calls.
    assert.equal((await call(api.url, 'GET', `/key/info?key=${echoKey.key_id}`, { key: ADMIN_KEY })).status, 200);
  });

  test('key info and listing never show a secret or its hash', async () => {
    const info = await call(api.url, 'GET', `/key/info?key=${encodeURIComponent(filesKey.key)}`, { key: ADMIN_KEY });
    assert.equal(info.status, 200);
    assert.equal(info.body.key, filesKey.key_id);
    assert.deepEqual(info.body.info.allowed_servers, ['files', 'demo']);
    assert.equal(info.body.info.tool_search_enabled, true);
    const list = await call(api.url, 'GET', '/key/list', { key: ADMIN_KEY });
    const text = JSON.stringify(list.body);
    assert.equal(list.body.keys.length >= 3, true);
    for (const secret of [filesKey.key, echoKey.key, listOnlyKey.key]) assert.ok(!text.includes(secret) && !text.includes(secret.slice(6)));
    assert.ok(!/secret|hash/i.test(text), 'no secret or hash field in the listing');
    const unknown = await call(api.url, 'GET', '/key/info?key=key_0000000000000000', { key: ADMIN_KEY });
    assert.equal(unknown.status, 404);
  });

  test('generate rejects bad specs with a 400 naming the field', async () => {
    for (const [body, field] of [
      [{ allowed_servers: 'files' }, /allowed_servers/],
      [{ tool_search_enabled: 'yes' }, /tool_search_enabled/],
      [{ rpm_limit: -1 }, /rpm_limit/],
      [{ duration: 'forever' }, /duration/],
      [{ expires: '2001-01-01T00:00:00Z' }, /future/],
      [{ allowed_servers: ['a'], surprise: true }, /surprise|Unrecognized/i],
    ] as const) {
      const reply = await call(api.url, 'POST', '/key/generate', { key: ADMIN_KEY, body });
      assert.equal(reply.status, 400, JSON.stringify(body));
      assert.match(reply.body.error.message, field);
    }
  });

  test('generate and update name every bad field of a body at once', async () => {
    const bad = { allowed_servers: 'files', tool_search_enabled: 'yes', rpm_limit: 0, duration: 'forever', surprise: true };
    for (const [path, body] of [
      ['/key/generate', bad],
      ['/key/update', { ...bad, key: 'key_anything' }],
    ] as const) {
      const reply = await call(api.url, 'POST', path, { key: ADMIN_KEY, body });
      assert.equal(reply.status, 400, path);
      for (const field of [/allowed_servers/, /tool_search_enabled/, /rpm_limit/, /duration: "forever" is not a duration/, /surprise/]) {
        assert.match(reply.body.error.message, field, `${path}: ${reply.body.error.message}`);
      }
    }
    // The duration/expires conflict is named beside a bad field, not after it is fixed.
    const both = await call(api.url, 'POST', '/key/generate', { key: ADMIN_KEY, body: { rpm_limit: -1, duration: '1h', expires: '2099-01-01T00:00:00Z' } });
    assert.equal(both.status, 400);
    assert.match(both.body.error.message, /rpm_limit/);
    assert.match(both.body.error.message, /duration: give duration or expires, not both/);
  });

  test('REST search never returns, ranks by, or selects tools outside the key', async () => {
    // Queries that name the hidden tools outright, in every mode.
    for (const body of [
      { query: 'export the payroll ledger salary spreadsheet', top_k: 50 },
      { query: 'payroll', mode: 'bm25', top_k: 50 },
      { query: 'adjust salary of an employee', mode: 'vector', top_k: 50 },
      { query: 'payroll|vault', mode: 'regex', top_k: 50 },
      { query: 'select:payroll_export,vault__echo,files__echo' },
      { query: 'echo the text back', top_k: 50 },
    ]) {
      const reply = await call(api.url, 'POST', '/v1/tools/search', { key: filesKey.key, body });
      assert.equal(reply.status, 200);
      const names: string[] = reply.body.results.map((result: { name: string }) => result.name);
      assert.deepEqual(names.filter(isHidden), [], `${JSON.stringify(body)} leaked ${names.filter(isHidden).join(', ')}`);
      assert.ok(names.every((name) => name.startsWith('files__') || fixtureTools().some((tool) => tool.name === name)));
    }
    // The admin sees the same tools, so the filter (not the ranking) is what hid them.
    const admin = await call(api.url, 'POST', '/v1/tools/search', { key: ADMIN_KEY, body: { query: 'select:payroll_export,vault__echo' } });
    assert.deepEqual(admin.body.results.map((result: { name: string }) => result.name), ['payroll_export', 'vault__echo']);

    const narrow = await call(api.url, 'POST', '/v1/tools/search', { key: echoKey.key, body: { query: 'add two numbers', top_k: 50 } });
    assert.deepEqual(narrow.body.results.map((result: { name: string }) => result.name).filter((name: string) => name !== 'files__echo'), []);
    // A key that sees one tool still gets it for a query that everyone else's tools match better: the key's search
    // ranks what it may see, it does not filter what is left of everyone's top candidates. (min_score 0: the ranking is
    // under test here; at the default, an unrelated query is answered with nothing.)
    for (const mode of ['hybrid', 'vector']) {
      const unrelated = await call(api.url, 'POST', '/v1/tools/search', { key: echoKey.key, body: { query: 'send an email to the team about the quarterly report', mode, min_score: 0 } });
      assert.deepEqual(unrelated.body.results.map((result: { name: string }) => result.name), ['files__echo'], mode);
    }
  });

  test('the catalog listing and server status show only the key\'s part', async () => {
    const catalog = await call(api.url, 'GET', '/v1/catalog', { key: filesKey.key });
    assert.equal(catalog.status, 200);
    const names: string[] = catalog.body.tools.map((entry: { tool: { name: string } }) => entry.tool.name);
    assert.deepEqual(names.filter(isHidden), []);
    assert.ok(names.includes('files__echo'));
    assert.deepEqual([...catalog.body.sources].sort(), ['demo', 'files']);
    const servers = await call(api.url, 'GET', '/v1/mcp/servers', { key: filesKey.key });
    assert.deepEqual(servers.body.servers.map((server: { name: string }) => server.name), ['files']);
    assert.equal(servers.body.servers[0].state, 'connected');
    assert.equal(servers.body.servers[0].status, 'connected', 'status, as SPEC.md names it');
    assert.equal(servers.body.servers[0].lastError, undefined, 'operator details stay with the admin');
    const echoOnly = await call(api.url, 'GET', '/v1/mcp/servers', { key: echoKey.key });
    assert.deepEqual(echoOnly.body.servers.map((server: { name: string; tools: number }) => [server.name, server.tools]), [['files', 1], ['vault', 0]]);
    const admin = await call(api.url, 'GET', '/v1/mcp/servers', { key: ADMIN_KEY });
    assert.ok(admin.body.servers.every((server: { clashes?: unknown }) => Array.isArray(server.clashes)));
  });

  test('the chat rewriter\'s catalog mode adds only tools the key may see, even when tool_choice names another', async () => {
    const body = {
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'export the payroll ledger with every salary' }],
      tools: [],
      tool_choice: { type: 'function', function: { name: 'payroll_export' } },
    };
    const headers = { 'x-toolrouter-catalog': 'true' };
    const restricted = await call(api.url, 'POST', '/v1/tools/rewrite', { key: filesKey.key, headers, body });
    assert.equal(restricted.status, 200);
    const names = (restricted.body.request.tools ?? []).map((tool: { function: { name: string } }) => tool.function.name);
    assert.ok(names.length > 0, 'ranked tools were added');
    assert.deepEqual(names.filter(isHidden), []);
    assert.deepEqual(restricted.body.decision.kept.map((tool: { name: string }) => tool.name).filter(isHidden), []);
    const admin = await call(api.url, 'POST', '/v1/tools/rewrite', { key: ADMIN_KEY, headers, body });
    assert.ok(admin.body.request.tools.some((tool: { function: { name: string } }) => tool.function.name === 'payroll_export'), 'the admin gets it');
  });

  test('a key without tool search gets 403 from the search API', async () => {
    const reply = await call(api.url, 'POST', '/v1/tools/search', { key: listOnlyKey.key, body: { query: 'echo' } });
    assert.equal(reply.status, 403);
    assert.match(reply.body.error.message, /search is disabled/);
  });

  test('/mcp-rest lists the key\'s tools and refuses calls outside it with 403 and the allowed servers', async () => {
    const list = await call(api.url, 'GET', '/mcp-rest/tools/list', { key: filesKey.key });
    const names: string[] = list.body.tools.map((tool: { name: string }) => tool.name);
    assert.ok(names.length > 0 && names.every((name) => name.startsWith('files__')));
    const ok = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: filesKey.key, body: { name: 'files__echo', arguments: { text: 'hi' } } });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.content[0].text, 'hi');
    for (const name of ['vault__echo', 'payroll_export', 'no_such_tool']) {
      const refused = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: filesKey.key, body: { name, arguments: { text: 'hi' } } });
      assert.equal(refused.status, 403, name);
      assert.match(refused.body.error.message, /allowed servers: files, demo/);
    }
    // The admin still gets 404 for a tool that does not exist.
    assert.equal((await call(api.url, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, body: { name: 'no_such_tool' } })).status, 404);
  });

  test('MCP: tools/list, search_tools, SEP-1821 queries and calls all follow the key', async () => {
    const client = await mcpClientWithKey(api.url, filesKey.key);
    clients.push(client);
    const listed = (await client.listTools()).tools.map((tool) => tool.name);
    assert.deepEqual(listed, ['search_tools', 'call_tool']);

    const search = await client.callTool({ name: 'search_tools', arguments: { query: 'echo the given text back', top_k: 50 } });
    const found = (search.structuredContent as { tools: { name: string }[] }).tools.map((tool) => tool.name);
    assert.ok(found.includes('files__echo'));
    assert.deepEqual(found.filter(isHidden), []);

    const queried = await client.request({ method: 'tools/list', params: { query: 'vault echo text' } } as never, (await import('@modelcontextprotocol/sdk/types.js')).ListToolsResultSchema);
    assert.deepEqual(queried.tools.map((tool) => tool.name).filter(isHidden), []);

    const echoed = await client.callTool({ name: 'call_tool', arguments: { name: 'files__echo', arguments: { text: 'through' } } });
    assert.equal(textOf(echoed), 'through');
    await expectToolRefusal(client.callTool({ name: 'call_tool', arguments: { name: 'vault__echo', arguments: { text: 'x' } } }), /allowed servers: files, demo/);
    await expectToolRefusal(client.callTool({ name: 'call_tool', arguments: { name: 'no_such_tool' } }), /allowed servers: files, demo/);
    await expectMcpError(client.callTool({ name: 'vault__echo', arguments: { text: 'x' } }), -32003, /not available to this key/);
    await expectMcpError(client.callTool({ name: 'no_such_tool', arguments: {} }), -32003, /not available to this key/);
  });

  test('MCP: a key without tool search gets its full listing and no virtual tools', async () => {
    const client = await mcpClientWithKey(api.url, listOnlyKey.key);
    clients.push(client);
    const listed = (await client.listTools()).tools.map((tool) => tool.name);
    assert.ok(listed.includes('files__echo'));
    assert.ok(!listed.includes('search_tools') && !listed.includes('call_tool'));
    assert.ok(listed.every((name) => name.startsWith('files__')));
    await expectMcpError(client.callTool({ name: 'search_tools', arguments: { query: 'echo' } }), -32003, /not available/);
    await expectMcpError(client.callTool({ name: 'call_tool', arguments: { name: 'files__echo' } }), -32003, /not available/);
    const { ListToolsResultSchema } = await import('@modelcontextprotocol/sdk/types.js');
    await expectMcpError(client.request({ method: 'tools/list', params: { query: 'echo' } } as never, ListToolsResultSchema), -32003, /search is disabled/);
    assert.equal(textOf(await client.callTool({ name: 'files__echo', arguments: { text: 'direct' } })), 'direct');
  });

  test('MCP: a session answers only the key that opened it', async () => {
    const client = await mcpClientWithKey(api.url, echoKey.key);
    clients.push(client);
    const sessionId = (client.transport as { sessionId?: string }).sessionId;
    assert.ok(sessionId);
    const body = { jsonrpc: '2.0', id: 99, method: 'tools/call', params: { name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 2 } } } };
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' };
    for (const key of [filesKey.key, ADMIN_KEY]) {
      const hijack = await fetch(`${api.url}/mcp`, { method: 'POST', headers: { ...headers, authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
      assert.equal(hijack.status, 403);
      await hijack.body?.cancel();
    }
    await expectToolRefusal(client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 2 } } }), /allowed tools: files__echo/);
  });

  test('an updated key applies at once, also inside an MCP session it already opened', async () => {
    const changing = await generateKey(api.url, { allowed_servers: ['files', 'vault'] });
    const client = await mcpClientWithKey(api.url, changing.key);
    clients.push(client);
    assert.equal(textOf(await client.callTool({ name: 'vault__echo', arguments: { text: 'before' } })), 'before');

    const narrowed = await call(api.url, 'POST', '/key/update', { key: ADMIN_KEY, body: { key: changing.key_id, allowed_servers: ['files'], key_alias: 'narrowed' } });
    assert.equal(narrowed.status, 200);
    assert.deepEqual(narrowed.body.info.allowed_servers, ['files']);
    assert.equal(narrowed.body.info.key_alias, 'narrowed');
    await expectMcpError(client.callTool({ name: 'vault__echo', arguments: { text: 'after' } }), -32003, /allowed servers: files/);
    assert.equal(textOf(await client.callTool({ name: 'files__echo', arguments: { text: 'still' } })), 'still');

    // null lifts a restriction; fields left out are kept.
    const widened = await call(api.url, 'POST', '/key/update', { key: ADMIN_KEY, body: { key: changing.key, allowed_servers: null } });
    assert.equal(widened.body.info.allowed_servers, null);
    assert.equal(widened.body.info.key_alias, 'narrowed');
    assert.equal(textOf(await client.callTool({ name: 'vault__echo', arguments: { text: 'again' } })), 'again');

    for (const [body, status, pattern] of [
      [{ key: 'key_doesnotexist', rpm_limit: 5 }, 404, /key_doesnotexist/],
      [{ allowed_servers: ['files'] }, 400, /key/],
      [{ key: changing.key_id, allowed_tools: 'files__echo' }, 400, /allowed_tools/],
      [{ key: changing.key_id, expires: '2001-01-01T00:00:00Z' }, 400, /future/],
    ] as const) {
      const reply = await call(api.url, 'POST', '/key/update', { key: ADMIN_KEY, body });
      assert.equal(reply.status, status, JSON.stringify(body));
      assert.match(reply.body.error.message, pattern);
    }
    assert.equal((await call(api.url, 'POST', '/key/update', { key: changing.key, body: { key: changing.key_id, allowed_servers: null } })).status, 403, 'admin only');
  });

  test('a deleted key stops working at once; deleting an unknown key changes nothing', async () => {
    const temporary = await generateKey(api.url, { allowed_servers: ['files'] });
    assert.equal((await call(api.url, 'GET', '/mcp-rest/tools/list', { key: temporary.key })).status, 200);
    const partlyUnknown = await call(api.url, 'POST', '/key/delete', { key: ADMIN_KEY, body: { keys: [temporary.key_id, 'key_doesnotexist'] } });
    assert.equal(partlyUnknown.status, 404);
    assert.match(partlyUnknown.body.error.message, /key_doesnotexist/);
    assert.equal((await call(api.url, 'GET', '/mcp-rest/tools/list', { key: temporary.key })).status, 200);
    const deleted = await call(api.url, 'POST', '/key/delete', { key: ADMIN_KEY, body: { keys: [temporary.key] } });
    assert.deepEqual(deleted.body.deleted_keys, [temporary.key_id]);
    assert.equal((await call(api.url, 'GET', '/mcp-rest/tools/list', { key: temporary.key })).status, 401);
  });

  test('an expired key is refused and says when it expired', async () => {
    const shortLived = await generateKey(api.url, { duration: '1s' });
    assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: shortLived.key })).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const reply = await call(api.url, 'GET', '/v1/catalog', { key: shortLived.key });
    assert.equal(reply.status, 401);
    assert.match(reply.body.error.message, /expired at/);
  });
});

describe('open service (no ADMIN_KEY)', () => {
  test('serves without a key on loopback, keys still narrow, a bad key is refused', async () => {
    const api = await startRouter({ catalog: { sources: { demo: fixtureTools(), internal: internalTools } } });
    try {
      await api.indexed();
      const open = await call(api.url, 'POST', '/v1/tools/search', { body: { query: 'payroll ledger' } });
      assert.equal(open.status, 200);
      assert.ok(isHidden(open.body.results[0].name), 'without a key the payroll tools are found');
      const { key } = (await call(api.url, 'POST', '/key/generate', { body: { allowed_servers: ['demo'] } })).body as { key: string };
      const narrowed = await call(api.url, 'POST', '/v1/tools/search', { key, body: { query: 'payroll ledger', top_k: 50 } });
      assert.deepEqual(narrowed.body.results.map((result: { name: string }) => result.name).filter(isHidden), []);
      assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: 'sk-tr-wrong' })).status, 401);
      // A bearer token that is not toolrouter's (an LLM provider key) is not a toolrouter credential.
      assert.equal((await call(api.url, 'GET', '/v1/catalog', { headers: { authorization: 'Bearer sk-openai-abc' } })).status, 200);
    } finally {
      await api.close();
    }
  });

  test('refuses to listen beyond loopback without ADMIN_KEY', async () => {
    const router = await createToolrouter(loadConfig({}, { port: 0, host: '0.0.0.0', logLevel: 'silent' }));
    try {
      await assert.rejects(listen(router), /without ADMIN_KEY/);
    } finally {
      await router.close();
    }
  });
});
