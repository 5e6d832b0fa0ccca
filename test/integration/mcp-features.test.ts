import assert from 'node:assert/strict';
import { createServer, type Server as HttpServer } from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ErrorCode,
  McpError,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import pino from 'pino';
import { Catalog } from '../../src/catalog/catalog.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { UpstreamManager, type UpstreamStatus } from '../../src/mcp/upstream/index.js';
import { startFeaturesHttp, type FeaturesHttp } from '../fixtures/mcp/features-server.js';
import { ADMIN_KEY, call, generateKey, mcpClientWithKey } from '../helpers/keys.js';
import { textOf, waitFor } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/** The features fixture over stdio, optionally slow to start. */
function featuresStdio(env: Record<string, string> = {}) {
  return {
    command: process.execPath,
    args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/features-server.ts')],
    cwd: REPO_ROOT,
    env,
  };
}

/** A loopback port nothing listens on (bound, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address ? address.port : 0;
}

async function plainHttp(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; close(): Promise<void> }> {
  const server: HttpServer = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('start-up: the first listing waits for slow upstreams and says which are missing', () => {
  let api: RunningRouter;

  after(async () => {
    await api?.close();
  });

  it('a client connecting at once gets the slow server in its first tools/list and search_tools, and is told of the dead one', async () => {
    const dead = await freePort();
    api = await startRouter({
      search: { pinned: ['slow__countdown'] },
      mcp: {
        search: true,
        startupWaitMs: 20_000,
        // The dead server stays down (not back to connecting) for the whole test.
        reconnect: { initialMs: 120_000, maxMs: 120_000 },
        servers: { slow: featuresStdio({ FIXTURE_START_DELAY_MS: '1500' }), dead: { url: `http://127.0.0.1:${dead}/mcp` } },
      },
    });
    // No waiting on upstreams or the index here: that is the gateway's job.
    const client = new Client({ name: 'early', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`)));
    try {
      const listed = await client.listTools();
      assert.deepEqual(
        listed.tools.map((tool) => tool.name),
        ['slow__countdown', 'search_tools', 'call_tool'],
        'the pinned tool of the slow server is in the very first listing',
      );
      assert.deepEqual(listed._meta?.['toolrouter/upstreams'], { connecting: [], down: ['dead'] });

      const found: any = await client.callTool({ name: 'search_tools', arguments: { query: 'run until cancelled by the caller' } });
      assert.equal(found.isError, undefined);
      assert.equal(found.structuredContent.tools[0]?.name, 'slow__wait_for_cancel', 'the first search already finds the slow server\'s tools');
      assert.deepEqual(found._meta['toolrouter/upstreams'], { connecting: [], down: ['dead'] });
      assert.match(found.content[1].text, /not available.*down: dead/);

      // Abstention: an empty answer says so in words.
      const none: any = await client.callTool({ name: 'search_tools', arguments: { query: 'regex:^nothing_is_called_this$' } });
      assert.deepEqual(none.structuredContent.tools, []);
      assert.match(none.content[1].text, /^No tool matched "regex:\^nothing_is_called_this\$"/);
    } finally {
      await client.close();
    }
  });
});

describe('gateway features: progress, cancellation, resources, prompts, tasks, keys', () => {
  let api: RunningRouter;
  let http: FeaturesHttp;
  let client: Client;
  let key: string;

  before(async () => {
    http = await startFeaturesHttp();
    api = await startRouter({
      adminKey: ADMIN_KEY,
      mcp: { search: true, callTimeoutMs: 10_000, servers: { feat: featuresStdio(), web: { url: http.url } } },
    });
    await api.router.mcp.upstreams.settled();
    await api.indexed();
    client = await mcpClientWithKey(api.url, ADMIN_KEY);
    key = (await generateKey(api.url, { allowed_servers: ['web'] })).key;
  });

  after(async () => {
    await client?.close();
    await api?.close();
    await http?.close();
  });

  for (const server of ['feat', 'web']) {
    it(`relays progress notifications under the caller's token, directly and through call_tool (${server})`, async () => {
      for (const through of [false, true]) {
        const seen: Progress[] = [];
        const request = through
          ? { name: 'call_tool', arguments: { name: `${server}__countdown`, arguments: { steps: 4 } } }
          : { name: `${server}__countdown`, arguments: { steps: 4 } };
        const result = await client.callTool(request, CallToolResultSchema, { onprogress: (progress) => seen.push(progress) });
        assert.equal(textOf(result), 'counted 4');
        assert.deepEqual(
          seen.map((progress) => [progress.progress, progress.total, progress.message]),
          [
            [1, 4, 'step 1'],
            [2, 4, 'step 2'],
            [3, 4, 'step 3'],
            [4, 4, 'step 4'],
          ],
          `through call_tool: ${through}`,
        );
      }
    });

    it(`relays cancellation to the upstream, directly and through call_tool (${server})`, async () => {
      const cancelled = async () => Number(textOf(await client.callTool({ name: `${server}__cancellations`, arguments: {} })));
      const before = await cancelled();
      for (const through of [false, true]) {
        const controller = new AbortController();
        const request = through
          ? { name: 'call_tool', arguments: { name: `${server}__wait_for_cancel`, arguments: { ms: 20_000 } } }
          : { name: `${server}__wait_for_cancel`, arguments: { ms: 20_000 } };
        const pending = client.callTool(request, CallToolResultSchema, { signal: controller.signal });
        setTimeout(() => controller.abort('test cancels'), 300);
        await assert.rejects(pending);
      }
      await waitFor('both cancellations to reach the upstream', async () => (await cancelled()) === before + 2, 10_000);
    });
  }

  it('aggregates resources, templates and prompts, namespaced, and forwards reads and gets', async () => {
    const { resources } = await client.listResources();
    assert.deepEqual(resources.map((resource) => [resource.name, resource.uri]).sort(), [
      ['feat__readme', 'notes://readme'],
      ['web__readme', 'notes://readme'],
    ]);
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((template) => template.name).sort(), ['feat__item', 'web__item']);
    assert.equal(resourceTemplates[0]!.uriTemplate, 'notes://items/{id}');
    const read = await client.readResource({ uri: 'notes://readme' });
    assert.equal((read.contents[0] as { text: string }).text, 'fixture readme');
    const item = await client.readResource({ uri: 'notes://items/42' });
    assert.equal((item.contents[0] as { text: string }).text, 'note 42');
    const { prompts } = await client.listPrompts();
    assert.deepEqual(prompts.map((prompt) => prompt.name).sort(), ['feat__summarize', 'web__summarize']);
    const prompt = await client.getPrompt({ name: 'web__summarize', arguments: { topic: 'tides' } });
    assert.deepEqual(prompt.messages[0]!.content, { type: 'text', text: 'Summarize tides' });
    await assert.rejects(client.readResource({ uri: 'notes://elsewhere/1' }), (error: unknown) => error instanceof McpError && error.code === -32002);
    await assert.rejects(client.getPrompt({ name: 'nope__summarize' }), (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams);
  });

  it('shows resources and prompts only of the servers a key is allowed, over /mcp and /mcp-rest', async () => {
    const restricted = await mcpClientWithKey(api.url, key);
    try {
      assert.deepEqual((await restricted.listResources()).resources.map((resource) => resource.name), ['web__readme']);
      assert.deepEqual((await restricted.listPrompts()).prompts.map((prompt) => prompt.name), ['web__summarize']);
      await assert.rejects(restricted.getPrompt({ name: 'feat__summarize', arguments: { topic: 'x' } }));
    } finally {
      await restricted.close();
    }
    const listed = await call(api.url, 'GET', '/mcp-rest/resources/list', { key });
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body.resources.map((resource: any) => resource.name), ['web__readme']);
    assert.deepEqual(listed.body.resourceTemplates.map((template: any) => template.name), ['web__item']);
    const read = await call(api.url, 'POST', '/mcp-rest/resources/read', { key, body: { uri: 'notes://items/7' } });
    assert.equal(read.status, 200);
    assert.equal(read.body.contents[0].text, 'note 7');
    const prompts = await call(api.url, 'GET', '/mcp-rest/prompts/list', { key });
    assert.deepEqual(prompts.body.prompts.map((prompt: any) => prompt.name), ['web__summarize']);
    const hidden = await call(api.url, 'POST', '/mcp-rest/prompts/get', { key, body: { name: 'feat__summarize', arguments: { topic: 'x' } } });
    assert.equal(hidden.status, 404);
    const got = await call(api.url, 'POST', '/mcp-rest/prompts/get', { key, body: { name: 'web__summarize', arguments: { topic: 'x' } } });
    assert.equal(got.status, 200);
    assert.equal(got.body.messages[0].content.text, 'Summarize x');
  });

  it('tools that require task-augmented calls are listed, searchable and callable (run as a task upstream)', async () => {
    const entry = api.router.catalog.get('feat__long_job');
    assert.ok(entry, 'in the catalog');
    assert.equal((entry.tool as { execution?: { taskSupport?: string } }).execution?.taskSupport, undefined, 'offered as a plain tool: toolrouter runs the task');
    const found: any = await client.callTool({ name: 'search_tools', arguments: { query: 'select:feat__long_job,feat__countdown' } });
    assert.deepEqual(
      found.structuredContent.tools.map((tool: any) => tool.name),
      ['feat__long_job', 'feat__countdown'],
    );
    const direct = await client.callTool({ name: 'feat__long_job', arguments: { n: 7 } });
    assert.equal(textOf(direct), 'job 7 done');
    const through = await client.callTool({ name: 'call_tool', arguments: { name: 'feat__long_job', arguments: { n: 8 } } });
    assert.equal(textOf(through), 'job 8 done');
    const rest = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, body: { name: 'feat__long_job', arguments: { n: 9 } } });
    assert.equal(rest.status, 200);
    assert.equal(rest.body.content[0].text, 'job 9 done');
    const status = api.router.mcp.upstreams.status().find((server) => server.name === 'feat')!;
    assert.ok(!status.skipped.some((line) => /long_job/.test(line)), status.skipped.join('; '));
  });

  it('a caller\'s task of a tool the upstream can run as a task runs as a task upstream too; a plain call stays plain', async () => {
    assert.equal(textOf(await client.callTool({ name: 'feat__maybe_job', arguments: { n: 1 } })), 'job 1: plain call');
    for (const [n, params] of [
      [2, { name: 'feat__maybe_job', arguments: { n: 2 } }],
      [3, { name: 'call_tool', arguments: { name: 'feat__maybe_job', arguments: { n: 3 } } }],
    ] as const) {
      const created = await client.request({ method: 'tools/call', params: { ...params, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
      const result = await client.request({ method: 'tasks/result', params: { taskId: created.task.taskId } }, CallToolResultSchema, { timeout: 20_000 });
      assert.equal(textOf(result), `job ${n}: task`);
    }
    const rest = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, body: { name: 'feat__maybe_job', arguments: { n: 4 }, task: {} } });
    assert.equal(rest.status, 202, JSON.stringify(rest.body));
    await waitFor('REST task done', async () => (await call(api.url, 'GET', `/mcp-rest/tasks/${rest.body.task.taskId}`, { key: ADMIN_KEY })).body.task?.status === 'completed');
    const done = await call(api.url, 'GET', `/mcp-rest/tasks/${rest.body.task.taskId}/result`, { key: ADMIN_KEY });
    assert.equal(textOf(done.body.result), 'job 4: task');
  });

  it('REST search reads "regex:" and "select:" exactly as search_tools does', async () => {
    const rest = await call(api.url, 'POST', '/v1/tools/search', { key: ADMIN_KEY, body: { query: 'regex:^web__', top_k: 20 } });
    assert.equal(rest.status, 200);
    const names = rest.body.results.map((result: any) => result.name);
    assert.ok(names.length >= 3);
    assert.ok(names.every((name: string) => name.startsWith('web__')), names.join(', '));
    const mcp: any = await client.callTool({ name: 'search_tools', arguments: { query: 'regex:^web__', top_k: 20 } });
    assert.deepEqual(mcp.structuredContent.tools.map((tool: any) => tool.name), names);
    const selected = await call(api.url, 'POST', '/v1/tools/search', { key: ADMIN_KEY, body: { query: 'select:feat__countdown' } });
    assert.deepEqual(selected.body.results.map((result: any) => result.name), ['feat__countdown']);
  });

  it('JSON-RPC errors carry their code once, not "MCP error -32602: MCP error -32602: ..."', async () => {
    const error = await client.callTool({ name: 'feat__no_such_tool', arguments: {} }).then(
      () => assert.fail('an unknown tool is a JSON-RPC error'),
      (caught: unknown) => caught as McpError,
    );
    assert.equal(error.code, ErrorCode.InvalidParams);
    assert.equal(error.message, 'MCP error -32602: unknown tool "feat__no_such_tool"; use search_tools to find tools');
  });

  it('relays resource subscriptions to the owning server and its updates to the subscribed session only', async () => {
    const subscriber = await mcpClientWithKey(api.url, ADMIN_KEY);
    const bystander = await mcpClientWithKey(api.url, ADMIN_KEY);
    const updates: string[] = [];
    const bystanderUpdates: string[] = [];
    subscriber.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => void updates.push(notification.params.uri));
    bystander.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => void bystanderUpdates.push(notification.params.uri));
    const subscribers = async () => JSON.parse(textOf(await client.callTool({ name: 'feat__subscribers', arguments: {} }))) as string[];
    try {
      // notes://items/5 comes from a template; feat is the first server whose template matches.
      await subscriber.subscribeResource({ uri: 'notes://items/5' });
      assert.deepEqual(await subscribers(), ['notes://items/5']);
      assert.equal(textOf(await client.callTool({ name: 'feat__touch', arguments: { uri: 'notes://items/5' } })), 'notified');
      await waitFor('the update to reach the subscriber', () => updates.length === 1);
      assert.deepEqual(updates, ['notes://items/5']);
      await subscriber.unsubscribeResource({ uri: 'notes://items/5' });
      assert.deepEqual(await subscribers(), [], 'the last unsubscribe is relayed');
      assert.deepEqual(bystanderUpdates, []);
    } finally {
      await subscriber.close();
      await bystander.close();
    }
  });

  it('tells clients resources/list_changed when a server with resources goes away, and lists without it', async () => {
    let notified = 0;
    const watcher = await mcpClientWithKey(api.url, ADMIN_KEY);
    watcher.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
      notified++;
    });
    try {
      await watcher.listResources();
      await http.close();
      await waitFor('list_changed after web went down', () => notified >= 1, 10_000);
      assert.deepEqual((await watcher.listResources()).resources.map((resource) => resource.name), ['feat__readme']);
    } finally {
      await watcher.close();
    }
  });
});

describe('upstream failures carry their real cause', () => {
  it('ECONNREFUSED, HTTP status with a body excerpt, 401 with WWW-Authenticate, TLS, DNS: in the status and the log at warn', async () => {
    const refused = await freePort();
    const notFound = await plainHttp((_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('<html><body>Cannot POST /mcp — nothing here</body></html>');
    });
    const unauthorized = await plainHttp((_req, res) => {
      res.writeHead(401, { 'www-authenticate': 'Bearer realm="fixture", error="invalid_token"', 'content-type': 'application/json' });
      res.end('{"error":"invalid_token"}');
    });
    const lines: any[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const upstreams = new UpstreamManager(new Catalog({ separator: '__' }), {
      servers: {
        refused: { url: `http://127.0.0.1:${refused}/mcp` },
        missing: { url: notFound.url },
        locked: { url: unauthorized.url },
        tls: { url: notFound.url.replace('http://', 'https://') },
        nodns: { url: 'http://toolrouter-test-host.invalid/mcp' },
      },
      separator: '__',
      reconnect: { initialMs: 60_000, maxMs: 60_000 },
      connectTimeoutMs: 5_000,
      pingIntervalMs: 0,
      log,
    });
    try {
      upstreams.start();
      await upstreams.settled();
      const byName = new Map<string, UpstreamStatus>(upstreams.status().map((status) => [status.name, status]));
      const errorOf = (name: string) => byName.get(name)?.lastError ?? '';
      assert.match(errorOf('refused'), /ECONNREFUSED/);
      assert.match(errorOf('missing'), /^HTTP 404 Not Found: <html><body>Cannot POST \/mcp — nothing here/);
      assert.match(errorOf('locked'), /^HTTP 401 Unauthorized \(WWW-Authenticate: Bearer realm="fixture", error="invalid_token"\): \{"error":"invalid_token"\}/);
      assert.match(errorOf('tls'), /SSL|TLS|EPROTO/i);
      assert.match(errorOf('nodns'), /ENOTFOUND|EAI_AGAIN|getaddrinfo/);
      for (const [name, status] of byName) {
        assert.equal(status.state, 'down', name);
        assert.doesNotMatch(status.lastError ?? '', /^connection closed$/i, name);
      }
      const warned = lines.filter((line) => line.level === 40 && line.msg === 'upstream down').map((line) => line.upstream);
      assert.deepEqual(warned.sort(), ['locked', 'missing', 'nodns', 'refused', 'tls']);
    } finally {
      await upstreams.close();
      await notFound.close();
      await unauthorized.close();
    }
  });
});
