/**
 * Upstream servers added at run time without Redis: PUT / DELETE / reconnect on /v1/mcp/servers, the state file
 * across a restart, the refusals (config servers, stdio), and secrets absent from every answer and log line.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.js';
import { STATE_FILE } from '../../src/mcp/upstream/runtime-servers.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/http-server.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';

const SECRET = 'Bearer rt-secret-7f3a9c';

/** A router whose log lines (all levels) are kept, to check that no secret reaches them. */
async function start(overrides: Record<string, unknown>, lines: string[]): Promise<{ router: Toolrouter; url: string; close(): Promise<void>; call(method: string, route: string, body?: unknown): Promise<{ status: number; text: string; body: any }> }> {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const config = loadConfig({}, { port: 0, host: '127.0.0.1', ...overrides });
  const router = await createToolrouter(config, { log: pino({ level: 'trace' }, sink) });
  const server: Server = await listen(router);
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return {
    router,
    url,
    call: async (method, route, body) => {
      const response = await fetch(url + route, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
      return { status: response.status, text, body: parsed };
    },
    close: async () => {
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
      await router.close();
    },
  };
}

describe('runtime MCP servers without Redis', () => {
  const lines: string[] = [];
  const stateDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-state-'));
  let tracker: HttpFixture;
  let api: Awaited<ReturnType<typeof start>>;
  const settings = { stateDir, mcp: { servers: { files: stdioFixtureServer() }, search: false } };

  before(async () => {
    tracker = await startHttpFixture();
    api = await start(settings, lines);
  });

  after(async () => {
    await api?.close();
    await tracker?.close();
  });

  it('PUT adds an HTTP server: 201, its secrets masked in the answer; it connects and its tools are callable', async () => {
    const put = await api.call('PUT', '/v1/mcp/servers/tracker', { type: 'http', url: tracker.url, headers: { Authorization: SECRET } });
    assert.equal(put.status, 201, put.text);
    assert.deepEqual(put.body.server, { name: 'tracker', origin: 'runtime', type: 'http', url: tracker.url, headers: { Authorization: '***' } });
    await waitFor('tracker connected', () => api.router.mcp.upstreams.statusOf('tracker')?.state === 'connected');
    const called = await api.call('POST', '/mcp-rest/tools/call', { name: 'tracker__whoami', arguments: {} });
    assert.equal(called.status, 200, called.text);
    // The header went upstream as given.
    assert.equal(JSON.parse(textOf(called.body)).authorization, SECRET);
    const listed = await api.call('GET', '/v1/mcp/servers');
    const server = listed.body.servers.find((entry: any) => entry.name === 'tracker');
    assert.equal(server.origin, 'runtime');
    assert.deepEqual(server.config.headers, { Authorization: '***' });
    assert.equal(listed.text.includes('rt-secret'), false);
  });

  it('PUT again with other settings replaces it (200); reconnect connects again now (202)', async () => {
    const put = await api.call('PUT', '/v1/mcp/servers/tracker', { transport: 'streamable-http', url: tracker.url, headers: { Authorization: SECRET, 'x-team': 'core' } });
    assert.equal(put.status, 200, put.text);
    await waitFor('tracker connected', () => api.router.mcp.upstreams.statusOf('tracker')?.state === 'connected');
    const reconnect = await api.call('POST', '/v1/mcp/servers/tracker/reconnect');
    assert.equal(reconnect.status, 202, reconnect.text);
    assert.equal(reconnect.body.status.state, 'connecting');
    await waitFor('tracker connected again', () => api.router.mcp.upstreams.statusOf('tracker')?.state === 'connected');
  });

  it('refuses what it must: config servers (409), stdio without mcp.runtimeStdio (403), bad fields (400 naming them), unknown (404)', async () => {
    const deleteConfigured = await api.call('DELETE', '/v1/mcp/servers/files');
    assert.equal(deleteConfigured.status, 409);
    assert.match(deleteConfigured.body.error.message, /server "files" comes from the config file \(mcp\.servers\) and cannot be deleted at run time/);
    const putConfigured = await api.call('PUT', '/v1/mcp/servers/files', { url: tracker.url });
    assert.equal(putConfigured.status, 409);
    const stdio = await api.call('PUT', '/v1/mcp/servers/local', stdioFixtureServer());
    assert.equal(stdio.status, 403);
    assert.match(stdio.body.error.message, /mcp\.runtimeStdio: true/);
    const bad = await api.call('PUT', '/v1/mcp/servers/bad', { url: 'not a url', headers: { a: 1 } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /url|headers/);
    assert.equal((await api.call('PUT', '/v1/mcp/servers/bad name', { url: tracker.url })).status, 400);
    assert.equal((await api.call('DELETE', '/v1/mcp/servers/nope')).status, 404);
    assert.equal((await api.call('POST', '/v1/mcp/servers/nope/reconnect')).status, 404);
    assert.equal(api.router.mcp.upstreams.statusOf('local'), undefined, 'nothing was added');
  });

  it('the state file keeps runtime servers (keys too, readable by this user only) across a restart', async () => {
    const file = path.join(stateDir, STATE_FILE);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const stored = JSON.parse(readFileSync(file, 'utf8'));
    assert.deepEqual(Object.keys(stored.servers), ['tracker']);
    assert.equal(stored.servers.tracker.headers.Authorization, SECRET);
    await api.close();
    api = await start(settings, lines);
    await waitFor('tracker connected after the restart', () => api.router.mcp.upstreams.statusOf('tracker')?.state === 'connected');
    assert.equal(api.router.mcp.upstreams.statusOf('tracker')?.origin, 'runtime');
    assert.ok(api.router.catalog.get('tracker__create_issue'));
  });

  it('DELETE removes it: tools gone, the name free, the state file without it', async () => {
    const deleted = await api.call('DELETE', '/v1/mcp/servers/tracker');
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal(api.router.mcp.upstreams.statusOf('tracker'), undefined);
    assert.equal(api.router.catalog.get('tracker__create_issue'), undefined);
    assert.deepEqual(JSON.parse(readFileSync(path.join(stateDir, STATE_FILE), 'utf8')).servers, {});
    const called = await api.call('POST', '/mcp-rest/tools/call', { name: 'tracker__whoami', arguments: {} });
    assert.equal(called.status, 404);
  });

  it('no log line carries the secret', () => {
    assert.ok(lines.length > 10, 'the log was captured');
    assert.deepEqual(lines.filter((line) => line.includes('rt-secret')), []);
  });
});
