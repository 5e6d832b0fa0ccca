import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, LATEST_PROTOCOL_VERSION, ListToolsResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { backoff, type UpstreamStatus } from '../../src/mcp/upstream/index.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/http-server.js';
import { connectHttpClient, readJsonRpc, stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const TRACKER_TOOLS = ['create_issue', 'list_issues', 'close_issue', 'search_code', 'get_file', 'whoami', 'broken', 'add_tool'];
const CALL_TIMEOUT_MS = 1_000;

/** tools/list with SEP-1821's params.query, which the SDK client's types do not know yet. */
async function listWithQuery(client: Client, params: { query?: string; cursor?: string }) {
  return client.request({ method: 'tools/list', params: params as { cursor?: string } }, ListToolsResultSchema);
}

/** Every page of an unfiltered tools/list (the test config pages by 3). */
async function listedNames(client: Client): Promise<string[]> {
  const names: string[] = [];
  for (let page = await client.listTools(); ; page = await client.listTools({ cursor: page.nextCursor })) {
    names.push(...page.tools.map((tool) => tool.name));
    if (!page.nextCursor) return names;
  }
}

function statusOf(api: RunningRouter, name: string): UpstreamStatus {
  return api.router.mcp.upstreams.status().find((status) => status.name === name)!;
}

describe('MCP gateway over /mcp', () => {
  let tracker: HttpFixture;
  let api: RunningRouter;
  let client: Client;
  let listChanged: () => number;

  before(async () => {
    tracker = await startHttpFixture();
    api = await startRouter({
      search: { pinned: ['files__echo', 'files__dyn_pinned'] },
      mcp: {
        // Forced on: some tests take an upstream down, and the rest would be small enough for "auto" to list whole.
        search: true,
        servers: {
          files: stdioFixtureServer({ FIXTURE_SECRET: 's3cret' }),
          tracker: { url: tracker.url, headers: { 'x-api-key': 'test-key' } },
        },
        callTimeoutMs: CALL_TIMEOUT_MS,
        pingIntervalMs: 200,
        reconnect: { initialMs: 200, maxMs: 1_000 },
        pageSize: 3,
      },
    });
    await api.router.mcp.upstreams.settled();
    assert.deepEqual(
      api.router.mcp.upstreams.status().map((status) => [status.name, status.state]),
      [
        ['files', 'connected'],
        ['tracker', 'connected'],
      ],
    );
    await api.indexed();
    ({ client, listChanged } = await connectHttpClient(api.url));
  });

  after(async () => {
    await client?.close();
    await api?.close();
    await tracker?.close();
  });

  it('initialize advertises tools.listChanged, SEP-1821 tools.filtering and instructions on the query format', async () => {
    // Raw JSON-RPC: the SDK client's schema drops capability fields it does not know, like `filtering`.
    const response = await fetch(`${api.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      }),
    });
    assert.equal(response.status, 200);
    const sessionId = response.headers.get('mcp-session-id');
    assert.ok(sessionId, 'stateful sessions hand out an Mcp-Session-Id');
    const message = await readJsonRpc(response);
    assert.deepEqual(message.result.capabilities.tools, { listChanged: true, filtering: true });
    assert.equal(message.result.serverInfo.name, 'toolrouter');
    const instructions: string = message.result.instructions;
    assert.match(instructions, /search_tools/);
    assert.match(instructions, /call_tool/);
    assert.match(instructions, /SEP-1821/);
    assert.match(instructions, /params\.query/);
    assert.match(instructions, /select:name1,name2/);
    assert.match(instructions, /regex:/);
    // The SDK client sees the same instructions.
    assert.equal(client.getInstructions(), instructions);
    const closed = await fetch(`${api.url}/mcp`, { method: 'DELETE', headers: { 'mcp-session-id': sessionId } });
    assert.equal(closed.status, 200);
  });

  it('tools/list shows the pinned tools and the two virtual tools, nothing else', async () => {
    const { tools, nextCursor } = await client.listTools();
    assert.equal(nextCursor, undefined);
    // files__dyn_pinned is pinned too but does not exist (yet), so it is not listed.
    assert.deepEqual(tools.map((tool) => tool.name), ['files__echo', 'search_tools', 'call_tool']);
    const echo = api.router.catalog.get('files__echo')!.tool;
    assert.deepEqual(tools[0], echo, 'pinned tools are listed with their full definition');
    assert.deepEqual(echo.inputSchema.required, ['text']);
    const search = tools.find((tool) => tool.name === 'search_tools')!;
    assert.deepEqual(search.inputSchema.required, ['query']);
    assert.ok(search.inputSchema.properties?.top_k);
    assert.ok(search.outputSchema, 'search_tools declares its structured output');
    const call = tools.find((tool) => tool.name === 'call_tool')!;
    assert.deepEqual(call.inputSchema.required, ['name']);
    assert.ok(call.inputSchema.properties?.arguments);
  });

  it('lists every tool of an upstream that paginates tools/list (8 tools in pages of 2)', async () => {
    const names = api.router.mcp.gateway
      .callableEntries()
      .filter((entry) => entry.source === 'tracker')
      .map((entry) => entry.tool.name);
    assert.deepEqual(names.sort(), TRACKER_TOOLS.map((name) => `tracker__${name}`).sort());
    assert.ok(tracker.listRequests() >= 4, 'the fixture served several pages');
    assert.equal(api.router.catalog.get('tracker__create_issue')!.server, 'tracker');
  });

  it('search_tools returns full definitions with scores, as JSON text and as structuredContent', async () => {
    const result: any = await client.callTool({ name: 'search_tools', arguments: { query: 'open a new issue in the tracker', top_k: 3 } });
    assert.equal(result.isError, undefined);
    const { tools } = result.structuredContent;
    assert.equal(tools.length, 3);
    assert.equal(tools[0].name, 'tracker__create_issue');
    const { score, scores, ...definition } = tools[0];
    assert.ok(score > 0 && score <= 1, `score in (0, 1]: ${score}`);
    assert.equal(typeof scores, 'object');
    assert.deepEqual(definition, api.router.catalog.get('tracker__create_issue')!.tool, 'the full definition, as tools/list would give it');
    assert.deepEqual(JSON.parse(textOf(result)), result.structuredContent, 'text content is the same JSON');
  });

  it('search_tools leaves pinned tools out, defaults top_k, finds tools of both servers, and reports bad arguments', async () => {
    const echoSearch: any = await client.callTool({ name: 'search_tools', arguments: { query: 'echo the given text back' } });
    const names = echoSearch.structuredContent.tools.map((tool: any) => tool.name);
    assert.equal(names.length, 5, 'default top_k is 5');
    assert.ok(!names.includes('files__echo'), 'pinned tools are listed already and never take a search slot');
    const addSearch: any = await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers and return the sum', top_k: 1 } });
    assert.deepEqual(addSearch.structuredContent.tools.map((tool: any) => tool.name), ['files__add']);
    const select: any = await client.callTool({ name: 'search_tools', arguments: { query: 'select:tracker__whoami,files__pid' } });
    assert.deepEqual(select.structuredContent.tools.map((tool: any) => tool.name), ['tracker__whoami', 'files__pid']);
    const regex: any = await client.callTool({ name: 'search_tools', arguments: { query: 'regex:^files__(add|env)\\b', top_k: 10 } });
    assert.deepEqual(regex.structuredContent.tools.map((tool: any) => tool.name).sort(), ['files__add', 'files__env']);

    const missing: any = await client.callTool({ name: 'search_tools', arguments: { top_k: 3 } });
    assert.equal(missing.isError, true);
    assert.match(textOf(missing), /must have required property 'query'/);
    const badTopK: any = await client.callTool({ name: 'search_tools', arguments: { query: 'x', top_k: 0 } });
    assert.equal(badTopK.isError, true);
    assert.match(textOf(badTopK), /\/top_k: must be >= 1/);
  });

  it('call_tool forwards to the owning upstream and returns its result unchanged', async () => {
    const sum: any = await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 2, b: 3 } } });
    assert.deepEqual(sum, { content: [{ type: 'text', text: '5' }], structuredContent: { sum: 5 } });

    // The same call made directly against the upstream must give the identical result (content kinds, _meta, ...).
    const direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StreamableHTTPClientTransport(new URL(tracker.url)));
    try {
      const expected = await direct.callTool({ name: 'get_file', arguments: { path: 'README.md' } });
      const proxied = await client.callTool({ name: 'call_tool', arguments: { name: 'tracker__get_file', arguments: { path: 'README.md' } } });
      assert.deepEqual(proxied, expected);
      assert.deepEqual((proxied as any)._meta, { 'fixture/origin': 'http' });
    } finally {
      await direct.close();
    }
  });

  it('hidden tools stay directly callable by name (not only through call_tool)', async () => {
    const listed = await listedNames(client);
    assert.ok(!listed.includes('tracker__close_issue'));
    const result = await client.callTool({ name: 'tracker__close_issue', arguments: { number: 3 } });
    assert.equal(textOf(result), 'closed issue #3');
    const pinned = await client.callTool({ name: 'files__echo', arguments: { text: 'hi there' } });
    assert.equal(textOf(pinned), 'hi there');
  });

  it('passes configured env to stdio upstreams and configured headers to HTTP upstreams', async () => {
    const env = await client.callTool({ name: 'files__env', arguments: { name: 'FIXTURE_SECRET' } });
    assert.equal(textOf(env), 's3cret');
    const whoami = await client.callTool({ name: 'tracker__whoami', arguments: {} });
    assert.equal(JSON.parse(textOf(whoami))['x-api-key'], 'test-key');
  });

  it('validates arguments against the inputSchema before forwarding, listing every problem', async () => {
    const through: any = await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 'two' } } });
    assert.equal(through.isError, true);
    const message = textOf(through);
    assert.match(message, /^invalid arguments for "files__add": /);
    assert.match(message, /\/a: must be number/);
    assert.match(message, /must have required property 'b'/);

    const direct: any = await client.callTool({
      name: 'tracker__create_issue',
      arguments: { title: '', labels: 'bug', assignee: 'me' },
    });
    assert.equal(direct.isError, true);
    assert.match(textOf(direct), /\/title: must NOT have fewer than 1 characters/);
    assert.match(textOf(direct), /\/labels: must be array/);
    assert.match(textOf(direct), /must NOT have additional properties "assignee"/);

    // A 2020-12 schema is validated in its own dialect.
    const dialect: any = await client.callTool({ name: 'tracker__search_code', arguments: {} });
    assert.equal(dialect.isError, true);
    assert.match(textOf(dialect), /must have required property 'query'/);

    const badCall: any = await client.callTool({ name: 'call_tool', arguments: { arguments: {} } });
    assert.equal(badCall.isError, true);
    assert.match(textOf(badCall), /^invalid arguments for call_tool: .*must have required property 'name'/);
  });

  it('an unknown tool is a JSON-RPC InvalidParams error when called directly, an error result through call_tool', async () => {
    await assert.rejects(
      client.callTool({ name: 'files__nope', arguments: {} }),
      (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams && /unknown tool "files__nope"/.test(error.message),
    );
    const through: any = await client.callTool({ name: 'call_tool', arguments: { name: 'files__nope', arguments: {} } });
    assert.equal(through.isError, true);
    assert.match(textOf(through), /unknown tool "files__nope"; use search_tools to find tools/);
  });

  it('calling a virtual tool through call_tool is an error, not recursion', async () => {
    for (const name of ['call_tool', 'search_tools']) {
      const result: any = await client.callTool({
        name: 'call_tool',
        arguments: { name, arguments: { name: 'files__echo', arguments: { text: 'loop' }, query: 'x' } },
      });
      assert.equal(result.isError, true, name);
      assert.match(textOf(result), new RegExp(`"${name}" is one of toolrouter's own tools`));
    }
  });

  it('times out a hanging upstream call and keeps the upstream usable', async () => {
    const started = performance.now();
    const result: any = await client.callTool({ name: 'call_tool', arguments: { name: 'files__slow', arguments: { ms: 20_000 } } });
    const elapsed = performance.now() - started;
    assert.equal(result.isError, true);
    assert.match(textOf(result), /did not answer "files__slow" within 1000 ms/);
    assert.ok(elapsed >= CALL_TIMEOUT_MS * 0.9 && elapsed < CALL_TIMEOUT_MS * 3, `timed out after ${elapsed.toFixed(0)} ms`);
    assert.equal(textOf(await client.callTool({ name: 'files__echo', arguments: { text: 'still here' } })), 'still here');
    assert.equal(statusOf(api, 'files').state, 'connected');
  });

  it("passes an upstream's own error result through unchanged and turns its protocol errors into error results", async () => {
    const failed: any = await client.callTool({ name: 'call_tool', arguments: { name: 'files__fail', arguments: {} } });
    assert.equal(failed.isError, true);
    assert.match(textOf(failed), /fixture failure/);
    const broken: any = await client.callTool({ name: 'tracker__broken', arguments: {} });
    assert.equal(broken.isError, true);
    assert.match(textOf(broken), /upstream MCP server "tracker" answered with an error: .*the tracker backend is unreachable/);
  });

  it('SEP-1821: tools/list with params.query returns the matching subset of the real catalog, paginated', async () => {
    const first = await listWithQuery(client, { query: 'close an issue' });
    assert.equal(first.tools.length, 3, 'page size 3');
    assert.equal(first.tools[0]!.name, 'tracker__close_issue');
    assert.ok(first.nextCursor);
    const all = [...first.tools];
    for (let cursor: string | undefined = first.nextCursor; cursor; ) {
      const page = await listWithQuery(client, { query: 'close an issue', cursor });
      all.push(...page.tools);
      cursor = page.nextCursor;
    }
    const names = all.map((tool) => tool.name);
    assert.equal(new Set(names).size, names.length, 'no tool on two pages');
    assert.equal(names.length, 10, 'at most mcp.queryLimit (10) tools');
    assert.ok(!names.includes('search_tools') && !names.includes('call_tool'), 'the real catalog, not the virtual tools');
    assert.ok(!names.includes('files__echo'), 'pinned tools are listed without a query already');
    assert.deepEqual(all[0], api.router.catalog.get('tracker__close_issue')!.tool, 'plain definitions, as tools/list gives them');
    // Same order as search_tools, which answers only the tools at or above min_score (the listing fills queryLimit).
    const searched: any = await client.callTool({ name: 'search_tools', arguments: { query: 'close an issue', top_k: 10 } });
    const answered = searched.structuredContent.tools.map((tool: any) => tool.name);
    assert.ok(answered.length > 0);
    assert.deepEqual(names.slice(0, answered.length), answered);

    const selected = await listWithQuery(client, { query: 'select:files__add' });
    assert.deepEqual(selected.tools.map((tool) => tool.name), ['files__add']);
    const none = await listWithQuery(client, { query: 'regex:^nothing-matches-this$' });
    assert.deepEqual(none.tools, []);

    await assert.rejects(listWithQuery(client, { query: 'something else', cursor: first.nextCursor }), (error: unknown) => {
      return error instanceof McpError && error.code === ErrorCode.InvalidParams && /invalid cursor/.test(error.message);
    });
    await assert.rejects(listWithQuery(client, { cursor: 'garbage' }), (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams);
  });

  it('re-lists an upstream on notifications/tools/list_changed, and tells our clients when pinned tools change', async () => {
    const searchToolText = async () => (await client.listTools()).tools.find((tool) => tool.name === 'search_tools')!.description!;
    const countBefore = Number(/- files \((\d+)\)/.exec(await searchToolText())![1]);
    const before = listChanged();
    // A new tool that is not pinned: searchable and callable after the re-list. The tool list shows the same tools, but
    // search_tools' description counts the server's tools, so clients are told once.
    await client.callTool({ name: 'files__add_tool', arguments: { name: 'dyn_hidden' } });
    await waitFor('files__dyn_hidden in the catalog', () => api.router.catalog.get('files__dyn_hidden'));
    assert.equal(textOf(await client.callTool({ name: 'call_tool', arguments: { name: 'files__dyn_hidden', arguments: {} } })), 'dyn_hidden called');
    await waitFor('a list_changed notification for the new count', () => listChanged() > before);
    assert.match(await searchToolText(), new RegExp(`- files \\(${countBefore + 1}\\)`));
    const afterHidden = listChanged();

    // A pinned tool appearing changes what tools/list returns: clients are notified.
    await client.callTool({ name: 'files__add_tool', arguments: { name: 'dyn_pinned' } });
    await waitFor('a list_changed notification', () => listChanged() > afterHidden);
    assert.equal(listChanged(), afterHidden + 1, 'exactly one notification per change');
    assert.deepEqual(await listedNames(client), ['files__echo', 'files__dyn_pinned', 'search_tools', 'call_tool']);

    await client.callTool({ name: 'files__remove_tool', arguments: { name: 'dyn_pinned' } });
    await waitFor('a second list_changed notification', () => listChanged() > afterHidden + 1);
    assert.deepEqual(await listedNames(client), ['files__echo', 'search_tools', 'call_tool']);

    // Over HTTP the upstream's notification arrives on its event stream.
    await client.callTool({ name: 'tracker__add_tool', arguments: { name: 'late_tool' } });
    await waitFor('tracker__late_tool in the catalog', () => api.router.catalog.get('tracker__late_tool'));
    assert.equal(textOf(await client.callTool({ name: 'tracker__late_tool', arguments: {} })), 'late_tool called');
  });

  it('static catalog sources are not exposed by the MCP face (nothing to forward a call to)', async () => {
    const put = await api.request('PUT', '/v1/catalog/sources/static_demo', {
      tools: [{ name: 'static_send_email', description: 'Send an email message', inputSchema: { type: 'object' } }],
    });
    assert.equal(put.status, 200);
    await api.indexed();
    const rest = await api.post('/v1/tools/search', { query: 'send an email message', top_k: 3 });
    assert.equal(rest.body.results[0].name, 'static_send_email', 'the search API does see it');
    const mcp: any = await client.callTool({ name: 'search_tools', arguments: { query: 'send an email message', top_k: 20 } });
    assert.ok(!mcp.structuredContent.tools.some((tool: any) => tool.name === 'static_send_email'));
    await assert.rejects(client.callTool({ name: 'static_send_email', arguments: {} }), McpError);
    assert.equal((await api.request('DELETE', '/v1/catalog/sources/static_demo')).status, 200);
  });

  it('REST cannot overwrite or delete the source of an upstream server (409)', async () => {
    const put = await api.request('PUT', '/v1/catalog/sources/files', { tools: [] });
    assert.equal(put.status, 409);
    assert.equal(put.body.error.code, 'conflict');
    assert.match(put.body.error.message, /upstream MCP server "files"/);
    const del = await api.request('DELETE', '/v1/catalog/sources/tracker');
    assert.equal(del.status, 409);
    assert.ok(api.router.catalog.get('files__echo'), 'the upstream tools are still there');
  });

  describe('/mcp-rest (LiteLLM-compatible)', () => {
    it('GET /mcp-rest/tools/list lists every callable tool with its server', async () => {
      const response = await api.request('GET', '/mcp-rest/tools/list');
      assert.equal(response.status, 200);
      const add = response.body.tools.find((tool: any) => tool.name === 'files__add');
      assert.deepEqual(add, { ...api.router.catalog.get('files__add')!.tool, mcp_info: { server_name: 'files' } });
      assert.ok(response.body.tools.some((tool: any) => tool.name === 'tracker__close_issue'));
      assert.ok(!response.body.tools.some((tool: any) => tool.name === 'search_tools'));
      const filtered = await api.request('GET', '/mcp-rest/tools/list?server_id=tracker');
      assert.ok(filtered.body.tools.length >= TRACKER_TOOLS.length);
      assert.ok(filtered.body.tools.every((tool: any) => tool.mcp_info.server_name === 'tracker'));
    });

    it('POST /mcp-rest/tools/call forwards and returns the result', async () => {
      const response = await api.post('/mcp-rest/tools/call', { name: 'files__add', arguments: { a: 20, b: 22 } });
      assert.equal(response.status, 200);
      assert.deepEqual(response.body, { content: [{ type: 'text', text: '42' }], structuredContent: { sum: 42 } });
      // A tool's own error result is an answer, not a failure.
      const failed = await api.post('/mcp-rest/tools/call', { name: 'files__fail', arguments: {} });
      assert.equal(failed.status, 200);
      assert.equal(failed.body.isError, true);
    });

    it('maps failures to statuses: 400 bad arguments, 404 unknown tool, 502 upstream error, 504 timeout', async () => {
      const bad = await api.post('/mcp-rest/tools/call', { name: 'files__add', arguments: { a: 1 } });
      assert.equal(bad.status, 400);
      assert.deepEqual(Object.keys(bad.body), ['error']);
      assert.equal(bad.body.error.code, 'invalid_request');
      assert.match(bad.body.error.message, /must have required property 'b'/);
      const noName = await api.post('/mcp-rest/tools/call', { arguments: {} });
      assert.equal(noName.status, 400);
      assert.match(noName.body.error.message, /name/);
      const unknown = await api.post('/mcp-rest/tools/call', { name: 'files__nope', arguments: {} });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.error.code, 'not_found');
      const recursion = await api.post('/mcp-rest/tools/call', { name: 'call_tool', arguments: { name: 'files__echo' } });
      assert.equal(recursion.status, 400);
      // The REST mirror's names: the gateway's unknown_tool is not_found above, its recursion is invalid_request.
      assert.equal(recursion.body.error.code, 'invalid_request');
      const upstream = await api.post('/mcp-rest/tools/call', { name: 'tracker__broken', arguments: {} });
      assert.equal(upstream.status, 502);
      assert.equal(upstream.body.error.code, 'upstream_error');
      const timeout = await api.post('/mcp-rest/tools/call', { name: 'files__slow', arguments: { ms: 20_000 } });
      assert.equal(timeout.status, 504);
      assert.equal(timeout.body.error.code, 'upstream_timeout');
    });

    it('GET /v1/mcp/servers reports each upstream', async () => {
      const response = await api.request('GET', '/v1/mcp/servers');
      assert.equal(response.status, 200);
      const files = response.body.servers.find((server: any) => server.name === 'files');
      assert.equal(files.transport, 'stdio');
      assert.equal(files.state, 'connected');
      assert.ok(files.tools >= 8);
      assert.equal(response.body.servers.find((server: any) => server.name === 'tracker').transport, 'http');
    });
  });

  describe('/mcp sessions', () => {
    it('404s an unknown session, 400s a first request that is not initialize, and ends a session on DELETE', async () => {
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
      const unknown = await fetch(`${api.url}/mcp`, { method: 'POST', headers: { ...headers, 'mcp-session-id': 'nope' }, body: list });
      assert.equal(unknown.status, 404);
      const noSession = await fetch(`${api.url}/mcp`, { method: 'POST', headers, body: list });
      assert.equal(noSession.status, 400);

      const other = await connectHttpClient(api.url);
      const transport = other.client.transport as StreamableHTTPClientTransport;
      const sessionId = transport.sessionId!;
      const sessionsBefore = api.router.mcp.http.sessions();
      await transport.terminateSession();
      assert.equal(api.router.mcp.http.sessions(), sessionsBefore - 1);
      const after = await fetch(`${api.url}/mcp`, { method: 'POST', headers: { ...headers, 'mcp-session-id': sessionId }, body: list });
      assert.equal(after.status, 404);
      await other.client.close();
    });

    it('refuses a non-loopback Host header while bound to loopback (DNS rebinding)', async () => {
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(`${api.url}/mcp`, { method: 'POST', headers: { host: 'evil.example:80', 'content-type': 'application/json' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end('{}');
      });
      assert.equal(status, 403);
    });
  });

  it('stdio upstream crash: its tools leave the catalog and search, calls say upstream_unavailable, and all come back after the respawn', async () => {
    const pid = Number(textOf(await client.callTool({ name: 'files__pid', arguments: {} })));
    assert.ok(pid > 0 && pid !== process.pid);
    const notifiedBefore = listChanged();
    const seenStates: string[] = [];
    let whileDown: Promise<{ search: string[]; call: any; direct: any; catalogHasFiles: boolean; list: string[] }> | undefined;
    const onStatus = (status: UpstreamStatus) => {
      if (status.name !== 'files') return;
      seenStates.push(status.state);
      // Respawning takes hundreds of ms (backoff + node start); these run within milliseconds of the loss.
      if (status.state === 'down' && !whileDown) {
        whileDown = (async () => ({
          catalogHasFiles: api.router.catalog.snapshot().entries.some((entry) => entry.source === 'files'),
          search: ((await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers', top_k: 10 } })) as any).structuredContent.tools.map(
            (tool: any) => tool.name,
          ),
          call: await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 1 } } }),
          direct: await client.callTool({ name: 'files__add', arguments: { a: 1, b: 1 } }),
          list: await listedNames(client),
        }))();
      }
    };
    api.router.mcp.upstreams.on('status', onStatus);
    try {
      process.kill(pid, 'SIGKILL');
      await waitFor('files to go down', () => whileDown);
      const down = await whileDown!;
      assert.equal(down.catalogHasFiles, false, 'its tools left the catalog');
      assert.ok(!down.search.some((name) => name.startsWith('files__')), `search returns none of its tools: ${down.search.join(', ')}`);
      // Not "unknown tool" (which sends the model hunting for another tool): the tool is known, its server is not there.
      for (const result of [down.call, down.direct]) {
        assert.equal(result.isError, true);
        assert.match(textOf(result), /upstream MCP server "files" is (reconnecting|not connected)/);
        assert.doesNotMatch(textOf(result), /unknown tool/);
      }
      assert.deepEqual(down.list, ['search_tools', 'call_tool'], 'the pinned tool left tools/list');
      const status = statusOf(api, 'files');
      assert.ok(status.lastError, 'the status says why');
      assert.ok((status.knownTools ?? 0) >= 5, `its tools stay known: ${status.knownTools}`);

      await waitFor('files to reconnect', () => statusOf(api, 'files').state === 'connected', 15_000);
      assert.deepEqual(seenStates.slice(0, 1), ['down']);
      assert.ok(seenStates.includes('connecting'));
      const newPid = Number(textOf(await client.callTool({ name: 'files__pid', arguments: {} })));
      assert.ok(newPid > 0 && newPid !== pid, 'a new process');
      assert.equal(textOf(await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 1 } } })), '2');
      await api.indexed();
      const found: any = await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers', top_k: 1 } });
      assert.equal(found.structuredContent.tools[0].name, 'files__add');
      await waitFor('list_changed for the pinned tool leaving and returning', () => listChanged() >= notifiedBefore + 2);
      assert.deepEqual(await listedNames(client), ['files__echo', 'search_tools', 'call_tool']);
    } finally {
      api.router.mcp.upstreams.off('status', onStatus);
    }
  });

  it('HTTP upstream outage: its tools leave while it is down and return when it is back on the same port', async () => {
    const port = tracker.port;
    await tracker.close();
    await waitFor('tracker to be noticed down', () => statusOf(api, 'tracker').state !== 'connected', 5_000);
    assert.equal(api.router.catalog.get('tracker__create_issue'), undefined);
    const rest = await api.post('/mcp-rest/tools/call', { name: 'tracker__create_issue', arguments: { title: 'x' } });
    assert.equal(rest.status, 503);
    assert.equal(rest.body.error.code, 'upstream_unavailable');
    assert.match(rest.body.error.message, /upstream MCP server "tracker"/);
    assert.ok(Number(rest.headers.get('retry-after')) >= 1, 'Retry-After says when the next attempt is due');
    const through: any = await client.callTool({ name: 'call_tool', arguments: { name: 'tracker__create_issue', arguments: { title: 'x' } } });
    assert.equal(through.isError, true);
    assert.match(textOf(through), /upstream MCP server "tracker"/);
    // The cause is the real one (the socket dropped or was reset, or a reconnect refused), not the SDK's "connection closed".
    assert.match(statusOf(api, 'tracker').lastError ?? '', /ECONNREFUSED|ECONNRESET|other side closed/);

    tracker = await startHttpFixture({ port });
    await waitFor('tracker to reconnect', () => statusOf(api, 'tracker').state === 'connected', 10_000);
    const created = await client.callTool({ name: 'call_tool', arguments: { name: 'tracker__create_issue', arguments: { title: 'back' } } });
    assert.equal(textOf(created), 'created issue #7: back');
    // A fresh server does not have the tool added at runtime earlier: the catalog follows the upstream.
    assert.equal(api.router.catalog.get('tracker__late_tool'), undefined);
  });
});

describe('MCP gateway with search: false (plain aggregator)', () => {
  let tracker: HttpFixture;
  let api: RunningRouter;
  let client: Client;

  before(async () => {
    tracker = await startHttpFixture();
    api = await startRouter({ mcp: { search: false, pageSize: 3, servers: { tracker: { url: tracker.url } } } });
    await api.router.mcp.upstreams.settled();
    ({ client } = await connectHttpClient(api.url));
  });
  after(async () => {
    await client?.close();
    await api?.close();
    await tracker?.close();
  });

  it('tools/list pages through the whole catalog, with no virtual tools', async () => {
    const names: string[] = [];
    let pages = 0;
    for (let cursor: string | undefined, first = true; first || cursor; first = false) {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      assert.ok(page.tools.length <= 3);
      names.push(...page.tools.map((tool) => tool.name));
      cursor = page.nextCursor;
      pages++;
    }
    assert.equal(pages, 3);
    assert.deepEqual(names, TRACKER_TOOLS.map((name) => `tracker__${name}`));
    assert.match(client.getInstructions() ?? '', /lists all of them/);
  });

  it('calls go straight to the tools; the virtual tools do not exist', async () => {
    assert.equal(textOf(await client.callTool({ name: 'tracker__close_issue', arguments: { number: 9 } })), 'closed issue #9');
    await assert.rejects(
      client.callTool({ name: 'search_tools', arguments: { query: 'x' } }),
      (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams,
    );
  });

  it('notifies clients when the aggregated list changes', async () => {
    const other = await connectHttpClient(api.url);
    try {
      await other.client.callTool({ name: 'tracker__add_tool', arguments: { name: 'fresh' } });
      await waitFor('list_changed', () => other.listChanged() > 0);
      const names: string[] = [];
      for (let page = await other.client.listTools(); ; page = await other.client.listTools({ cursor: page.nextCursor })) {
        names.push(...page.tools.map((tool) => tool.name));
        if (!page.nextCursor) break;
      }
      assert.deepEqual(names, [...TRACKER_TOOLS, 'fresh'].map((name) => `tracker__${name}`));
    } finally {
      await other.client.close();
    }
  });
});

describe('MCP gateway with namespacing off (separator "")', () => {
  let first: HttpFixture;
  let second: HttpFixture;
  let api: RunningRouter;

  before(async () => {
    first = await startHttpFixture();
    second = await startHttpFixture();
    api = await startRouter({
      catalog: { separator: '' },
      mcp: { pingIntervalMs: 200, reconnect: { initialMs: 100, maxMs: 500 }, servers: { one: { url: first.url }, two: { url: second.url } } },
    });
    await api.router.mcp.upstreams.settled();
  });
  after(async () => {
    await api?.close();
    await first?.close();
    await second?.close();
  });

  it('keeps upstream names; on a clash the first server keeps the name and the other reports it', async () => {
    const entry = api.router.catalog.get('create_issue');
    assert.ok(entry, 'tools keep their own names');
    const owner = entry.source;
    const loser = owner === 'one' ? 'two' : 'one';
    const status = statusOf(api, loser);
    assert.equal(status.state, 'connected');
    assert.equal(status.tools, 0);
    assert.equal(status.clashes.length, TRACKER_TOOLS.length);
    assert.match(status.clashes[0]!, new RegExp(`owned by source "${owner}"`));
    assert.equal(statusOf(api, owner).clashes.length, 0);
    const rest = await api.request('GET', '/v1/mcp/servers');
    assert.equal(rest.body.servers.find((server: any) => server.name === loser).clashes.length, TRACKER_TOOLS.length);

    // When the owner goes away, the other server's tools take over the names.
    await (owner === 'one' ? first : second).close();
    await waitFor(`${loser} to take over`, () => api.router.catalog.get('create_issue')?.source === loser, 5_000);
    assert.equal(statusOf(api, loser).clashes.length, 0);
  });
});

describe('toolrouter stdio', () => {
  it('serves the gateway to an SDK client over stdin/stdout and stops its upstreams when the client leaves', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const { REPO_ROOT } = await import('../helpers/paths.js');
    const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-stdio-'));
    const configFile = path.join(dir, 'config.json');
    // search: true, as the 9 fixture tools alone would be listed whole under the default "auto" (test/mcp-auto.test.ts).
    // startupWaitMs raised from 10 s: on a loaded test machine the index may take longer than a user's machine would.
    writeFileSync(
      configFile,
      JSON.stringify({ search: { pinned: ['files__echo'] }, mcp: { search: true, startupWaitMs: 60_000, servers: { files: stdioFixtureServer() } } }),
    );

    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', path.join(REPO_ROOT, 'src/cli.ts'), 'stdio'],
      cwd: REPO_ROOT,
      env: { TOOLROUTER_CONFIG: configFile, LOG_LEVEL: 'info' },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const client = new Client({ name: 'stdio-test', version: '1' });
    await client.connect(transport);
    const routerPid = transport.pid!;
    try {
      assert.match(client.getInstructions() ?? '', /SEP-1821/);
      // The upstream connects in the background and the index builds after it; the first listing and search wait for
      // both (mcp.startupWaitMs), so an agent that lists once at start sees the tools.
      assert.deepEqual(await listedNames(client), ['files__echo', 'search_tools', 'call_tool']);
      const found: any = await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers', top_k: 1 } });
      assert.equal(found.isError, undefined, textOf(found));
      assert.equal(found.structuredContent.tools[0]?.name, 'files__add');
      assert.deepEqual(found.structuredContent.tools[0].inputSchema.required, ['a', 'b']);
      const sum = await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 40, b: 2 } } });
      assert.deepEqual(sum, { content: [{ type: 'text', text: '42' }], structuredContent: { sum: 42 } });
      const filtered = await listWithQuery(client, { query: 'echo the given text' });
      assert.ok(filtered.tools.length > 0);
      // files__pid is hidden (not listed): called directly by name.
      const upstreamPid = Number(textOf(await client.callTool({ name: 'files__pid', arguments: {} })));
      assert.ok(upstreamPid > 0);
      const invalid: any = await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1 } } });
      assert.equal(invalid.isError, true);
      assert.match(textOf(invalid), /must have required property 'b'/);
      await assert.rejects(client.callTool({ name: 'files__nope', arguments: {} }), (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams);
      const recursion: any = await client.callTool({ name: 'call_tool', arguments: { name: 'call_tool', arguments: {} } });
      assert.equal(recursion.isError, true);

      await client.close();
      await waitFor('toolrouter stdio to exit', () => !isAlive(routerPid), 10_000);
      await waitFor('its upstream child to exit', () => !isAlive(upstreamPid), 10_000);
      // Logs went to stderr (stdout carried only protocol messages, or the client would have failed above).
      assert.match(stderr, /upstream connected/);
    } finally {
      await client.close().catch(() => {});
    }
  });
});

describe('reconnect backoff', () => {
  it('doubles per failure from initialMs, is capped at maxMs, and jitters within the upper half', () => {
    const policy = { initialMs: 100, maxMs: 1_000 };
    assert.equal(backoff(1, policy, () => 1), 100);
    assert.equal(backoff(1, policy, () => 0), 50);
    assert.equal(backoff(2, policy, () => 1), 200);
    assert.equal(backoff(4, policy, () => 1), 800);
    assert.equal(backoff(5, policy, () => 1), 1_000);
    assert.equal(backoff(50, policy, () => 1), 1_000);
    assert.equal(backoff(50, policy, () => 0), 500);
    for (let i = 0; i < 100; i++) {
      const delay = backoff(3, policy);
      assert.ok(delay >= 200 && delay <= 400);
    }
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
