import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioTransportV2 } from '@modelcontextprotocol/client/stdio';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListToolsResultSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startModernHttpFixture, type ModernHttpFixture } from '../fixtures/mcp/modern-server.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const MODERN = '2026-07-28';

function modernStdioFixture() {
  return { command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/modern-server.ts')], cwd: REPO_ROOT };
}

/** A v2 SDK client pinned to the stateless revision on toolrouter's /mcp, presenting `key`; counts tools/list_changed. */
async function modernClient(baseUrl: string, key?: string): Promise<{ client: ClientV2; listChanged: () => number }> {
  let count = 0;
  const client = new ClientV2({ name: 'revisions-test-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  client.setNotificationHandler('notifications/tools/list_changed', () => {
    count++;
  });
  const headers: Record<string, string> = key === undefined ? {} : { authorization: `Bearer ${key}` };
  await client.connect(new HttpTransportV2(new URL(`${baseUrl}/mcp`), { requestInit: { headers } }));
  return { client, listChanged: () => count };
}

/** A 1.x SDK client (2025-11-25, a session) on /mcp, presenting `key`; counts tools/list_changed. */
async function legacyClient(baseUrl: string, key?: string): Promise<{ client: Client; listChanged: () => number }> {
  let count = 0;
  const client = new Client({ name: 'revisions-test-v1', version: '1.0.0' });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    count++;
  });
  const headers: Record<string, string> = key === undefined ? {} : { authorization: `Bearer ${key}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers } }));
  return { client, listChanged: () => count };
}

const names = (result: { tools: { name: string }[] }) => result.tools.map((tool) => tool.name);

describe('MCP revisions on one toolrouter: 2026-07-28 (v2 SDK) and 2025-11-25 (1.x SDK), upstreams of both', () => {
  let weather: ModernHttpFixture;
  let api: RunningRouter;
  let filesKey: { key: string; key_id: string };

  before(async () => {
    weather = await startModernHttpFixture();
    api = await startRouter({
      adminKey: ADMIN_KEY,
      // Pinned before it exists: when an upstream adds it, every caller's tools/list changes.
      search: { pinned: ['modern__brand_new'] },
      mcp: {
        search: true,
        servers: { files: stdioFixtureServer(), modern: modernStdioFixture(), weather: { url: weather.url } },
        pingIntervalMs: 500,
      },
    });
    await api.router.mcp.upstreams.settled();
    await waitFor('all upstreams connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 60_000);
    await api.indexed();
    filesKey = await generateKey(api.url, { allowed_servers: ['files'] });
  });

  after(async () => {
    await api?.close();
    await weather?.close();
  });

  it('aggregates upstreams of both revisions (a 1.x server, a v2 server over stdio and over HTTP)', async () => {
    const catalog = api.router.catalog.snapshot().entries.map((entry) => entry.tool.name);
    for (const name of ['files__echo', 'modern__forecast', 'modern__convert_units', 'weather__forecast']) assert.ok(catalog.includes(name), name);
    // Each upstream on the newest revision it speaks: the 1.x server on 2025-11-25, the v2 servers on 2026-07-28.
    const revisions = Object.fromEntries(api.router.mcp.upstreams.status().map((status) => [status.name, status.revision]));
    assert.deepEqual(revisions, { files: '2025-11-25', modern: MODERN, weather: MODERN });
    const echoed = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, body: { name: 'modern__server_revision', arguments: {} } });
    assert.equal(echoed.body.content[0].text, 'modern', JSON.stringify(echoed.body));
  });

  it('a v2 client on 2026-07-28 lists, queries (SEP-1821), searches and calls, without a session', async () => {
    const { client } = await modernClient(api.url, ADMIN_KEY);
    try {
      assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
      assert.equal(client.getProtocolEra(), 'modern');
      const listed = await client.listTools();
      assert.deepEqual(names(listed), ['search_tools', 'call_tool']);
      const raw = listed as unknown as { ttlMs?: number; cacheScope?: string };
      assert.equal(typeof raw.ttlMs, 'number');
      assert.equal(raw.cacheScope, 'private', 'with keys, the list depends on the key');
      // The v2 client caches tools/list by cursor alone (it does not know SEP-1821): a query must bypass that cache.
      const query = (await client.listTools({ query: 'weather forecast for a city' } as never, { cacheMode: 'bypass' })) as { tools: { name: string }[] };
      assert.ok(names(query).some((name) => name.endsWith('__forecast')), JSON.stringify(names(query)));
      const found = (await client.callTool({ name: 'search_tools', arguments: { query: 'convert metres to feet', top_k: 3 } })) as any;
      assert.equal(found.isError, undefined, textOf(found));
      assert.match(found.structuredContent.tools[0].name, /__convert_units$/);
      const converted = await client.callTool({ name: 'call_tool', arguments: { name: 'modern__convert_units', arguments: { value: 10, to: 'ft' } } });
      assert.equal(textOf(converted), '32.81');
      const echoed = await client.callTool({ name: 'files__echo', arguments: { text: 'hi from 2026' } });
      assert.equal(textOf(echoed), 'hi from 2026');
      assert.equal(api.router.mcp.http.sessions(), 0, 'no session was opened');
    } finally {
      await client.close();
    }
  });

  it('a 1.x client on 2025-11-25 keeps its session on the same endpoint', async () => {
    const { client } = await legacyClient(api.url, ADMIN_KEY);
    try {
      assert.equal(client.getServerVersion()?.name, 'toolrouter');
      assert.deepEqual(names(await client.listTools()), ['search_tools', 'call_tool']);
      const query = await client.request({ method: 'tools/list', params: { query: 'weather forecast for a city' } as { cursor?: string } }, ListToolsResultSchema);
      assert.ok(names(query).some((name) => name.endsWith('__forecast')));
      const forecast = (await client.callTool({ name: 'call_tool', arguments: { name: 'weather__forecast', arguments: { city: 'Oslo', days: 2 } } })) as any;
      assert.deepEqual(forecast.structuredContent, { city: 'Oslo', days: 2, summary: 'sunny in Oslo' });
      assert.equal(api.router.mcp.http.sessions(), 1);
    } finally {
      await client.close();
    }
  });

  it('each stateless request is served with its own key: a key limited to one server sees only that server', async () => {
    const { client } = await modernClient(api.url, filesKey.key);
    try {
      const query = (await client.listTools({ query: 'weather forecast for a city' } as never, { cacheMode: 'bypass' })) as { tools: { name: string }[] };
      assert.ok(names(query).length > 0);
      assert.ok(names(query).every((name) => name.startsWith('files__')), JSON.stringify(names(query)));
      // The target is call_tool's argument: one outside the key is a failed call the model can read.
      const refused = (await client.callTool({ name: 'call_tool', arguments: { name: 'modern__forecast', arguments: { city: 'Oslo' } } })) as { isError?: boolean };
      assert.equal(refused.isError, true);
      assert.match(textOf(refused as never), /not available to this key/);
      assert.equal(textOf(await client.callTool({ name: 'files__echo', arguments: { text: 'mine' } })), 'mine');
    } finally {
      await client.close();
    }
    const anonymous = await fetch(`${api.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } } }),
    });
    assert.equal(anonymous.status, 401, 'a stateless request without a key is refused like any other');
    // Refused before the MCP server, yet in the shape an MCP client reads: a JSON-RPC error, toolrouter's code in data.
    const refusal = (await anonymous.json()) as { jsonrpc: string; id: unknown; error: { code: number; message: string; data: { code: string } } };
    assert.equal(refusal.jsonrpc, '2.0');
    assert.equal(refusal.id, null);
    assert.equal(refusal.error.code, -32600);
    assert.equal(refusal.error.data.code, 'unauthorized');
    const malformed = await fetch(`${api.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${ADMIN_KEY}` },
      body: '{"jsonrpc": "2.0", "id": 1,',
    });
    assert.equal(malformed.status, 400);
    assert.deepEqual(((await malformed.json()) as { error: { code: number } }).error.code, -32700, 'malformed JSON is a JSON-RPC parse error');
    // /mcp-rest is REST: its refusals keep toolrouter's REST shape.
    const rest = await fetch(`${api.url}/mcp-rest/tools/list`);
    assert.equal(rest.status, 401);
    assert.equal(((await rest.json()) as { error: { code: string } }).error.code, 'unauthorized');
  });

  it('list_changed reaches a 2026-07-28 client through subscriptions/listen and a 2025-11-25 client on its session', async () => {
    const modern = await modernClient(api.url, ADMIN_KEY);
    const legacy = await legacyClient(api.url, ADMIN_KEY);
    const subscription = await modern.client.listen({ toolsListChanged: true });
    try {
      await modern.client.callTool({ name: 'call_tool', arguments: { name: 'modern__add_tool', arguments: { name: 'brand_new' } } });
      await waitFor('the new tool in the catalog', () => api.router.catalog.get('modern__brand_new'));
      await waitFor('list_changed on the listen stream', () => modern.listChanged() > 0);
      await waitFor('list_changed on the 2025 session', () => legacy.listChanged() > 0);
    } finally {
      await modern.client.callTool({ name: 'call_tool', arguments: { name: 'modern__remove_tool', arguments: { name: 'brand_new' } } }).catch(() => {});
      await subscription.close();
      await modern.client.close();
      await legacy.client.close();
    }
  });
});

describe('MCP revisions: stateless requests on an open service', () => {
  let api: RunningRouter;

  before(async () => {
    api = await startRouter({ mcp: { search: true, pageSize: 1, queryLimit: 3, servers: { files: stdioFixtureServer() } } });
    await api.router.mcp.upstreams.settled();
    await api.indexed();
  });
  after(async () => {
    await api?.close();
  });

  it('marks lists public (everyone sees the same) and continues a query from its cursor alone', async () => {
    const { client } = await modernClient(api.url);
    try {
      const first = (await client.listTools({ query: 'add two numbers together' } as never, { cacheMode: 'bypass' })) as any;
      assert.equal(first.cacheScope, 'public');
      assert.ok(first.ttlMs > 0);
      // The v2 client's listTools() follows nextCursor on its own, sending the cursor without the query.
      assert.equal(first.tools.length, 3, 'all pages of the query, not the unfiltered list');
      assert.ok(first.tools.every((tool: { name: string }) => tool.name.startsWith('files__')), JSON.stringify(first.tools.map((tool: any) => tool.name)));
      const page = (await client.listTools({ query: 'add two numbers together' } as never, { cacheMode: 'bypass' })) as any;
      assert.deepEqual(page.tools.map((tool: any) => tool.name), first.tools.map((tool: any) => tool.name));
      await assert.rejects(client.request({ method: 'tools/list', params: { query: 'something else', cursor: 'not-a-cursor' } } as never), /invalid cursor/);
    } finally {
      await client.close();
    }
  });

  it('pairs a search with a later call through the search_id in the search_tools result, with no session', async () => {
    const { client } = await modernClient(api.url);
    try {
      const feedback = api.router.feedback!;
      const size = feedback.size;
      const found = (await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers together', top_k: 1 } })) as any;
      assert.deepEqual(found.structuredContent.tools.map((tool: { name: string }) => tool.name), ['files__add']);
      const searchId = found.structuredContent.search_id;
      assert.equal(typeof searchId, 'string');
      assert.deepEqual(JSON.parse(textOf(found)), found.structuredContent, 'the text JSON carries it too');
      // Another search in between: the id, not recency, decides which search the call is credited to.
      await client.callTool({ name: 'search_tools', arguments: { query: 'echo this text back to me', top_k: 3 } });
      await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 2 }, search_id: searchId } });
      await waitFor('the feedback event', () => feedback.size === size + 1);
      // The same tool for the same search again is not new evidence.
      await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 2 }, search_id: searchId } });
      const invalid = (await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 2 }, search_id: 7 } })) as any;
      assert.equal(invalid.isError, true, 'search_id must be a string');
      // Without an id, a stateless call is credited to the key's most recent search that returned the tool.
      await client.callTool({ name: 'files__echo', arguments: { text: 'hi' } });
      await waitFor('the second feedback event', () => feedback.size === size + 2);
    } finally {
      await client.close();
    }
  });
});

describe('toolrouter stdio serves both revisions', () => {
  let configFile: string;

  before(async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-stdio-revisions-'));
    configFile = path.join(dir, 'config.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        search: { pinned: ['modern__brand_new'] },
        mcp: { search: true, startupWaitMs: 60_000, servers: { files: stdioFixtureServer(), modern: modernStdioFixture() } },
      }),
    );
  });

  const command = () => ({
    command: process.execPath,
    args: ['--import', 'tsx', path.join(REPO_ROOT, 'src/cli.ts'), 'stdio'],
    cwd: REPO_ROOT,
    env: { TOOLROUTER_CONFIG: configFile, LOG_LEVEL: 'warn' },
    stderr: 'pipe' as const,
  });

  it('a v2 client negotiating (auto) gets 2026-07-28: lists, queries, searches, calls, and hears list changes through subscriptions/listen', async () => {
    const client = new ClientV2({ name: 'stdio-v2', version: '1' }, { versionNegotiation: { mode: 'auto' } });
    let changed = 0;
    client.setNotificationHandler('notifications/tools/list_changed', () => {
      changed++;
    });
    await client.connect(new StdioTransportV2(command()));
    try {
      assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
      const listed = await client.listTools(undefined, { cacheMode: 'bypass' });
      assert.deepEqual(names(listed), ['search_tools', 'call_tool']);
      const query = (await client.listTools({ query: 'weather forecast for a city' } as never, { cacheMode: 'bypass' })) as { tools: { name: string }[] };
      assert.ok(names(query).includes('modern__forecast'), JSON.stringify(names(query)));
      const forecast = (await client.callTool({ name: 'call_tool', arguments: { name: 'modern__forecast', arguments: { city: 'Lima' } } })) as any;
      assert.deepEqual(forecast.structuredContent, { city: 'Lima', days: 1, summary: 'sunny in Lima' });
      const subscription = await client.listen({ toolsListChanged: true });
      await client.callTool({ name: 'call_tool', arguments: { name: 'modern__add_tool', arguments: { name: 'brand_new' } } });
      await waitFor('list_changed over stdio', () => changed > 0, 20_000);
      assert.ok(names(await client.listTools(undefined, { cacheMode: 'bypass' })).includes('modern__brand_new'));
      await subscription.close();
    } finally {
      await client.close();
    }
  });

  it('a 1.x client gets 2025-11-25 with the same tools', async () => {
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const client = new Client({ name: 'stdio-v1', version: '1' });
    await client.connect(new StdioClientTransport(command()));
    try {
      assert.match(client.getInstructions() ?? '', /SEP-1821/);
      assert.deepEqual(names(await client.listTools()), ['search_tools', 'call_tool']);
      const sum = await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 40, b: 2 } } });
      assert.deepEqual(sum, { content: [{ type: 'text', text: '42' }], structuredContent: { sum: 42 } });
      const revision = await client.callTool({ name: 'call_tool', arguments: { name: 'modern__server_revision', arguments: {} } });
      assert.ok(['legacy', 'modern'].includes(textOf(revision)));
    } finally {
      await client.close();
    }
  });
});
