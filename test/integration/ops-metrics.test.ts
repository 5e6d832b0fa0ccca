import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.js';
import { errorHandler } from '../../src/http/errors.js';
import { requestLog } from '../../src/http/request-log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { stdioFixtureServer, waitFor } from '../helpers/mcp.js';
import { sample } from '../helpers/ops-processes.js';
import { fixtureTools, untilIndexed } from '../helpers/router.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A pino logger whose JSON lines the test reads. */
function capturingLogger(): { log: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

async function serve(app: express.Express | Toolrouter): Promise<{ url: string; server: Server }> {
  const server = 'app' in app ? await listen(app) : await new Promise<Server>((resolve) => {
    const started = app.listen(0, '127.0.0.1', () => resolve(started));
  });
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, server };
}

describe('operations: upstream metrics and request ids', () => {
  let router: Toolrouter;
  let url: string;
  let server: Server;
  const { log, lines } = capturingLogger();

  before(async () => {
    const config = loadConfig({}, {
      port: 0,
      host: '127.0.0.1',
      catalog: { sources: { fixture: fixtureTools() } },
      mcp: {
        servers: { live: stdioFixtureServer(), gone: { command: '/nonexistent/mcp-server' } },
        reconnect: { initialMs: 50, maxMs: 200 },
      },
    });
    router = await createToolrouter(config, { log });
    ({ url, server } = await serve(router));
    await untilIndexed(router);
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await router.close();
  });

  it('exports each upstream server\'s connection state, tool count and failures from its status events', async () => {
    const live = await waitFor('the live upstream to connect', () => router.mcp.upstreams.status().find((s) => s.name === 'live' && s.state === 'connected'));
    // A command that does not exist waits for a person: one failure, then no retries (issue 43).
    const gone = await waitFor('the dead upstream to fail', () => router.mcp.upstreams.status().find((s) => s.name === 'gone' && s.failures >= 1));
    assert.equal(gone.retryAt, undefined, 'no retry is scheduled for a command that cannot run');
    const text = await (await fetch(`${url}/metrics`)).text();
    assert.equal(sample(text, 'toolrouter_upstream_connected', { server: 'live', transport: 'stdio' }), 1);
    assert.equal(sample(text, 'toolrouter_upstream_tools', { server: 'live' }), live.tools);
    assert.ok(live.tools > 0);
    assert.equal(sample(text, 'toolrouter_upstream_failures', { server: 'live' }), 0);
    assert.equal(sample(text, 'toolrouter_upstream_connected', { server: 'gone', transport: 'stdio' }), 0);
    assert.equal(sample(text, 'toolrouter_upstream_tools', { server: 'gone' }), 0);
    assert.equal(sample(text, 'toolrouter_upstream_failures', { server: 'gone' }), 1);
  });

  it('keeps a caller\'s x-request-id, echoes it and logs the request under it', async () => {
    const response = await fetch(`${url}/v1/tools/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'trace-42.a' },
      body: JSON.stringify({ query: 'send an email' }),
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('x-request-id'), 'trace-42.a');
    const line = await waitFor('the request log line', () => lines.find((l) => l.reqId === 'trace-42.a' && l.msg === 'request'));
    assert.equal(line.method, 'POST');
    assert.equal(line.path, '/v1/tools/search');
    assert.equal(line.status, 200);
    assert.equal(typeof line.ms, 'number');
  });

  it('generates an id when there is none or it is unsafe to log', async () => {
    const plain = await fetch(`${url}/v1/catalog`);
    const generated = plain.headers.get('x-request-id') ?? '';
    assert.match(generated, UUID);
    const forged = await fetch(`${url}/v1/catalog`, { headers: { 'x-request-id': 'x", "admin": true, "y": "' } });
    assert.match(forged.headers.get('x-request-id') ?? '', UUID);
    assert.notEqual(forged.headers.get('x-request-id'), generated);
    await waitFor('the generated id in the log', () => lines.find((l) => l.reqId === generated && l.status === 200));
    assert.ok(!lines.some((l) => 'admin' in l), 'a forged id cannot add log fields');
  });

  it('logs probes and scrapes at debug, other requests at info', async () => {
    const id = 'probe-1';
    await fetch(`${url}/health`, { headers: { 'x-request-id': id } });
    const line = await waitFor('the probe log line', () => lines.find((l) => l.reqId === id));
    assert.equal(line.level, 20);
    assert.equal(lines.find((l) => l.reqId === 'trace-42.a')?.level, 30);
  });
});

describe('operations: error logs carry the request id', () => {
  it('logs a failed request with its id and answers a bare 500', async () => {
    const { log, lines } = capturingLogger();
    const app = express();
    app.use(requestLog(log));
    app.get('/boom', () => {
      throw new Error('secret detail');
    });
    app.use(errorHandler(log));
    const { url, server } = await serve(app);
    try {
      const response = await fetch(`${url}/boom`, { headers: { 'x-request-id': 'boom-1' } });
      assert.equal(response.status, 500);
      assert.equal(response.headers.get('x-request-id'), 'boom-1');
      assert.deepEqual(await response.json(), { error: { code: 'internal', message: 'internal error' } });
      const error = lines.find((l) => l.msg === 'request failed');
      assert.ok(error);
      assert.equal(error.reqId, 'boom-1');
      assert.equal(error.path, '/boom');
      assert.match(JSON.stringify(error.err), /secret detail/);
    } finally {
      server.close();
    }
  });
});
