import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/http-server.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { waitFor } from '../helpers/mcp.js';
import { closeListening } from '../helpers/router.js';

/**
 * Per-request upstream credentials (`passthroughHeaders`): a client sends `x-toolrouter-upstream-<server>-<header>`
 * and that request's calls to that server carry `<header>`; the next request without it does not, servers that do not
 * allow the header never see it, and toolrouter's logs never hold it. The upstream is a real SDK server whose whoami
 * tool echoes the headers of the request that carried the call.
 */
describe('passthrough headers', () => {
  const logs: string[] = [];
  let fixture: HttpFixture;
  let router: Toolrouter;
  let server: Server;
  let base: string;

  before(async () => {
    fixture = await startHttpFixture();
    const config = loadConfig(
      {},
      {
        port: 0,
        host: '127.0.0.1',
        adminKey: ADMIN_KEY,
        mcp: {
          search: false,
          startupWaitMs: 5_000,
          pingIntervalMs: 0,
          servers: { tracker: { url: fixture.url, passthroughHeaders: ['authorization', 'x-api-key'] }, plain: { url: fixture.url } },
        },
      },
    );
    const sink = new Writable({ write: (chunk, _encoding, done) => (logs.push(String(chunk)), done()) });
    router = await createToolrouter(config, { log: createLogger('debug', sink) });
    server = await listen(router);
    const address = server.address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    await waitFor('both servers connected', () => router.mcp.upstreams.status().every((status) => status.state === 'connected'), 15_000);
  });

  after(async () => {
    await closeListening(router, server);
    await fixture?.close();
  });

  const seen = async (tool: string, key: string, headers: Record<string, string>) => {
    const reply = await call(base, 'POST', '/mcp-rest/tools/call', { key, headers, body: { name: tool, arguments: {} } });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    return JSON.parse(reply.body.content[0].text) as Record<string, string>;
  };

  test('the header goes with that request\'s call only, and only to a server that allows it', async () => {
    const { key } = await generateKey(base, {});
    const secret = 'per-request-upstream-secret-123';
    const sent = { 'x-toolrouter-upstream-tracker-x-api-key': secret, 'x-toolrouter-upstream-tracker-authorization': 'Bearer upstream-token-456', 'x-toolrouter-upstream-plain-x-api-key': secret };
    const tracker = await seen('tracker__whoami', key, sent);
    assert.equal(tracker['x-api-key'], secret);
    assert.equal(tracker.authorization, 'Bearer upstream-token-456', 'the upstream credential, not toolrouter\'s key');
    assert.ok(!Object.keys(tracker).some((name) => name.startsWith('x-toolrouter-')), 'toolrouter\'s own headers stay here');
    const plain = await seen('plain__whoami', key, sent);
    assert.equal(plain['x-api-key'], undefined, 'a server without passthroughHeaders gets nothing');
    const next = await seen('tracker__whoami', key, {});
    assert.equal(next['x-api-key'], undefined, 'the next request without it sends none: nothing was stored');
    assert.equal(next.authorization, undefined);
    assert.ok(!logs.join('\n').includes(secret) && !logs.join('\n').includes('upstream-token-456'), 'never logged');
  });

  test('over /mcp too, with a real SDK client sending the header', async () => {
    const withHeader = new Client({ name: 'passthrough', version: '1.0.0' });
    await withHeader.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}`, 'x-toolrouter-upstream-tracker-x-api-key': 'from-mcp-client' } } }),
    );
    try {
      const result = await withHeader.callTool({ name: 'tracker__whoami', arguments: {} });
      assert.equal(JSON.parse((result.content as { text: string }[])[0]!.text)['x-api-key'], 'from-mcp-client');
    } finally {
      await withHeader.close();
    }
  });

  test('too many or oversized upstream headers are refused before any work', async () => {
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, index) => [`x-toolrouter-upstream-tracker-h${index}`, 'v']));
    const refused = await call(base, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, headers: many, body: { name: 'tracker__whoami', arguments: {} } });
    assert.equal(refused.status, 400);
    const big = await call(base, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, headers: { 'x-toolrouter-upstream-tracker-x-api-key': 'x'.repeat(9_000) }, body: { name: 'tracker__whoami', arguments: {} } });
    assert.equal(big.status, 400);
  });
});
