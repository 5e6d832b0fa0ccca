/**
 * Runtime MCP servers shared through Redis: two API instances and a worker (real processes) on a private Redis. A
 * server added on one instance is searchable on the other without a restart; after Redis restarts empty the instances
 * store it again; a DELETE on either removes it everywhere. Its secret header never shows in answers or logs.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/http-server.js';
import { startServe, startWorker, type CliProcess } from '../helpers/ops-processes.js';
import { eventually, writeConfig } from '../helpers/processes.js';
import { PrivateRedis } from '../helpers/redis-server.js';

const SECRET = 'Bearer shared-secret-51c0';

describe('runtime MCP servers across API instances (Redis)', () => {
  const redis = new PrivateRedis();
  const prefix = `tr-h29-${process.pid}`;
  let tracker: HttpFixture;
  let a: { process: CliProcess; url: string };
  let b: { process: CliProcess; url: string };
  let worker: { process: CliProcess };

  const call = async (base: string, method: string, route: string, body?: unknown) => {
    const response = await fetch(base + route, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    return { status: response.status, text, body: JSON.parse(text) };
  };
  const servers = async (base: string) => (await call(base, 'GET', '/v1/mcp/servers')).body.servers as { name: string; state: string }[];
  const found = async (base: string) => {
    const { body } = await call(base, 'POST', '/v1/tools/search', { query: 'open a new issue in the project issue tracker', top_k: 5 });
    return ((body.results ?? []) as { name: string }[]).map((result) => result.name);
  };

  before(async () => {
    await redis.start();
    tracker = await startHttpFixture();
    const config = writeConfig({ redisUrl: redis.url, port: 0, queue: { prefix, generationCheckMs: 300 }, mcp: { search: false } });
    worker = await startWorker(config);
    [a, b] = await Promise.all([startServe(config), startServe(config)]);
  });

  after(async () => {
    await Promise.all([a?.process.stop(), b?.process.stop(), worker?.process.stop()]);
    await tracker?.close();
    await redis.stop();
  });

  it('added on one instance, searchable on the other without a restart', async () => {
    const put = await call(a.url, 'PUT', '/v1/mcp/servers/tracker', { type: 'http', url: tracker.url, headers: { Authorization: SECRET } });
    assert.equal(put.status, 201, put.text);
    await eventually(() => servers(b.url), (list) => list.some((server) => server.name === 'tracker' && server.state === 'connected'), 30_000);
    const names = await eventually(() => found(b.url), (list) => list.includes('tracker__create_issue'), 60_000);
    assert.equal(names[0], 'tracker__create_issue');
  });

  it('after Redis restarts empty, the instances store it again and keep serving it', async () => {
    await redis.stop();
    await redis.start();
    const link = new Redis(redis.url);
    try {
      const stored = await eventually(() => link.hget(`${prefix}:mcp:servers`, 'tracker'), (value) => value !== null, 30_000);
      assert.equal(JSON.parse(stored!).url, tracker.url);
    } finally {
      link.disconnect();
    }
    for (const instance of [a, b]) {
      await eventually(() => servers(instance.url), (list) => list.some((server) => server.name === 'tracker' && server.state === 'connected'), 30_000);
    }
    await eventually(() => found(a.url), (list) => list.includes('tracker__create_issue'), 60_000);
  });

  it('deleted on the other instance, gone everywhere', async () => {
    const deleted = await call(b.url, 'DELETE', '/v1/mcp/servers/tracker');
    assert.equal(deleted.status, 200, deleted.text);
    await eventually(() => servers(a.url), (list) => !list.some((server) => server.name === 'tracker'), 30_000);
    await eventually(() => found(a.url), (list) => !list.includes('tracker__create_issue'), 30_000);
    const called = await call(a.url, 'POST', '/mcp-rest/tools/call', { name: 'tracker__whoami', arguments: {} });
    assert.equal(called.status, 404);
  });

  it('the secret header is in no answer and no log line of either instance', async () => {
    for (const instance of [a, b]) {
      assert.equal((await call(instance.url, 'GET', '/v1/mcp/servers')).text.includes('shared-secret'), false);
      const leaked = instance.process.logs.filter((line) => JSON.stringify(line).includes('shared-secret'));
      assert.deepEqual(leaked, []);
      assert.ok(instance.process.logs.length > 5);
    }
  });
});
