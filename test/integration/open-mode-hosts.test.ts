import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { stdioFixtureServer, waitFor } from '../helpers/mcp.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';

interface Answer {
  status: number;
  body: any;
  text: string;
}

/** A real HTTP request with the headers given as they are (fetch would not let a test forge Host). */
function send(url: string, method: string, route: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  // Host "" stands for no Host header at all (node would otherwise write the URL's).
  const { host, ...rest } = headers;
  const hostHeader = host === undefined ? {} : host === '' ? {} : { host };
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}${route}`,
      {
        method,
        setHost: host !== '',
        headers: {
          accept: 'application/json, text/event-stream',
          ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }),
          ...rest,
          ...hostHeader,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // Not JSON (the console's HTML, an SSE frame): kept as text.
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, text });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'host-test', version: '1' } } };

/** One request per route family: what a rebinding page would send. */
function routes(): { name: string; method: string; route: string; body?: unknown }[] {
  return [
    { name: 'probe', method: 'GET', route: '/health' },
    { name: 'search', method: 'POST', route: '/v1/tools/search', body: { query: 'send an email' } },
    { name: 'catalog read', method: 'GET', route: '/v1/catalog' },
    { name: 'catalog write', method: 'PUT', route: '/v1/catalog/sources/evil', body: { tools: [{ name: 'evil', inputSchema: { type: 'object' } }] } },
    { name: 'index status', method: 'GET', route: '/v1/index/status' },
    { name: 'keys', method: 'POST', route: '/key/generate', body: {} },
    { name: 'mcp', method: 'POST', route: '/mcp', body: INITIALIZE },
    { name: 'mcp-rest', method: 'POST', route: '/mcp-rest/tools/call', body: { name: 'files__echo', arguments: { text: 'written' } } },
    { name: 'chat', method: 'POST', route: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } },
    { name: 'console', method: 'GET', route: '/console/' },
    { name: 'metrics', method: 'GET', route: '/metrics' },
  ];
}

describe('open mode (no ADMIN_KEY): Host and Origin checks on every route', () => {
  let api: RunningRouter;
  let port: string;

  before(async () => {
    api = await startRouter({
      catalog: { sources: { demo: fixtureTools() } },
      mcp: { servers: { files: stdioFixtureServer() } },
      security: { allowedHosts: ['toolrouter.internal'], allowedOrigins: ['https://app.example'] },
    });
    port = new URL(api.url).port;
    await waitFor('files upstream connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 60_000);
    await api.indexed();
  });

  after(async () => {
    await api?.close();
  });

  it('refuses a rebound name on every route family with 403 naming security.allowedHosts, in each face\'s error shape', async () => {
    for (const host of ['evil.example.com:8080', `evil.example.com:${port}`, 'localhost.evil.example', '127.0.0.1.nip.io']) {
      for (const { name, method, route, body } of routes()) {
        const answer = await send(api.url, method, route, { host }, body);
        assert.equal(answer.status, 403, `${name} with Host "${host}": ${answer.text}`);
        assert.match(answer.text, /security\.allowedHosts/, name);
      }
    }
    // Each face keeps its own shape: JSON-RPC on /mcp, OpenAI's on the proxy, toolrouter's elsewhere.
    const mcp = await send(api.url, 'POST', '/mcp', { host: 'evil.example.com' }, INITIALIZE);
    assert.equal(mcp.body.jsonrpc, '2.0');
    assert.equal(mcp.body.error.data.code, 'forbidden');
    const chat = await send(api.url, 'POST', '/v1/chat/completions', { host: 'evil.example.com' }, { model: 'm', messages: [] });
    assert.equal(typeof chat.body.error.message, 'string');
    assert.equal(chat.body.error.type !== undefined, true, chat.text);
    const rest = await send(api.url, 'PUT', '/v1/catalog/sources/evil', { host: 'evil.example.com' }, { tools: [] });
    assert.equal(rest.body.error.code, 'forbidden');

    // Nothing the refused requests asked for happened: no source was written, no key made, no session opened.
    const catalog = await send(api.url, 'GET', '/v1/catalog', { host: `127.0.0.1:${port}` });
    assert.equal(catalog.status, 200);
    assert.ok(!catalog.body.sources.includes('evil'), JSON.stringify(catalog.body.sources));
    assert.equal(api.router.mcp.http.sessions(), 0);
  });

  it('answers loopback names and addresses, the configured host and security.allowedHosts', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`, '127.0.0.2', `[::ffff:127.0.0.1]:${port}`, 'toolrouter.internal']) {
      const answer = await send(api.url, 'POST', '/v1/tools/search', { host }, { query: 'send an email' });
      assert.equal(answer.status, 200, `Host "${host}": ${answer.text}`);
    }
    // The same write that a rebound page was refused goes through from loopback: the 403s above were the check's.
    const call = await send(api.url, 'POST', '/mcp-rest/tools/call', { host: `localhost:${port}` }, { name: 'files__echo', arguments: { text: 'written' } });
    assert.equal(call.status, 200, call.text);
    assert.equal(call.body.content[0].text, 'written');
  });

  it('refuses state-changing requests from another origin, serves reads and the console from its own', async () => {
    const host = `127.0.0.1:${port}`;
    for (const origin of ['https://evil.example', `http://localhost:${Number(port) + 1}`, `http://localhost:${port}`, 'null']) {
      for (const { name, method, route, body } of routes().filter((route) => route.method !== 'GET')) {
        const answer = await send(api.url, method, route, { host, origin }, body);
        assert.equal(answer.status, 403, `${name} from ${origin}: ${answer.text}`);
        assert.match(answer.text, /security\.allowedOrigins/, name);
      }
    }
    // Reading is not refused for the Origin (a browser still keeps the answer from the page: no CORS headers).
    assert.equal((await send(api.url, 'GET', '/v1/catalog', { host, origin: 'https://evil.example' })).status, 200);

    // The console, from both of its usual addresses: the page, then its API calls, which carry the page's origin.
    for (const base of [`127.0.0.1:${port}`, `localhost:${port}`]) {
      const page = await send(api.url, 'GET', '/console/', { host: base });
      assert.equal(page.status, 200);
      assert.match(page.text, /<html/i);
      const search = await send(api.url, 'POST', '/v1/tools/search', { host: base, origin: `http://${base}` }, { query: 'send an email' });
      assert.equal(search.status, 200, search.text);
      const put = await send(api.url, 'PUT', '/v1/catalog/sources/console-made', { host: base, origin: `http://${base}` }, { tools: [] });
      assert.equal(put.status, 200, put.text);
    }
    // An origin the settings name may write too.
    const allowed = await send(api.url, 'POST', '/v1/tools/search', { host, origin: 'https://app.example' }, { query: 'send an email' });
    assert.equal(allowed.status, 200, allowed.text);
  });
});

describe('a keyed service bound beyond loopback does not check Host (the key is the check)', () => {
  it('answers any Host once the key is right', async () => {
    // Configured as if listening on every interface; the test itself still binds to loopback only.
    const { loadConfig } = await import('../../src/config/config.js');
    const { createToolrouter } = await import('../../src/server.js');
    const router = await createToolrouter(loadConfig({}, { port: 0, host: '0.0.0.0', adminKey: 'sk-tr-admin-0123456789abcdef', logLevel: 'silent' }));
    const server = router.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const address = server.address() as { port: number };
      const url = `http://127.0.0.1:${address.port}`;
      const keyed = await send(url, 'GET', '/v1/catalog', { host: 'toolrouter.example.com', authorization: 'Bearer sk-tr-admin-0123456789abcdef' });
      assert.equal(keyed.status, 200, keyed.text);
      const anonymous = await send(url, 'GET', '/v1/catalog', { host: 'toolrouter.example.com' });
      assert.equal(anonymous.status, 401);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await router.close();
    }
  });
});
