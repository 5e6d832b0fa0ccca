import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import pino from 'pino';
import { RedisKeys } from '../../src/redis/connection.js';
import { RedisBus } from '../../src/redis/bus.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { eventually, WorkerProcess, writeConfig } from '../helpers/processes.js';
import { PrivateRedis, RedisLink } from '../helpers/redis-server.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/** Issue 17: one Redis bus per process, and every kind of shared state re-read after a reconnect. */

/** Connections Redis holds, by name (CLIENT LIST), other than the test's own. */
async function clients(probe: Redis): Promise<string[]> {
  const list = String(await probe.client('LIST'));
  return list
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '')
    .filter((name) => name !== 'test-probe');
}

const admin = (api: RunningRouter, method: string, route: string, body?: unknown) => call(api.url, method, route, { key: ADMIN_KEY, body });

describe('RedisBus', () => {
  const redis = new PrivateRedis();
  const keys = new RedisKeys('bus-unit');
  let bus: RedisBus;
  let probe: Redis;
  /** What the handler was asked to do, in order. */
  const calls: string[] = [];
  const heard: string[] = [];

  before(async () => {
    await redis.start();
    probe = new Redis(redis.url, { connectionName: 'test-probe' });
    probe.on('error', () => {});
    bus = new RedisBus({ url: redis.url, keys, log: pino({ level: 'silent' }), connectionName: 'bus-unit', generationCheckMs: 60_000 });
    await bus.listen('bus-unit:events', {
      message: (text) => heard.push(text),
      resync: async () => {
        calls.push('resync');
      },
      restore: async () => {
        calls.push('restore');
      },
    });
    await bus.start();
  });

  after(async () => {
    probe?.disconnect();
    await bus?.close();
    await redis.stop();
  });

  const kill = async (name: string) => {
    const line = String(await probe.client('LIST')).split('\n').find((entry) => entry.includes(` name=${name} `));
    assert.ok(line, `no connection named ${name}`);
    await probe.client('KILL', 'ID', /id=(\d+)/.exec(line)![1]!);
  };

  it('opens one command and one subscriber connection, and re-reads after either reconnects', async () => {
    assert.deepEqual((await clients(probe)).sort(), ['bus-unit', 'bus-unit:events']);
    await kill('bus-unit:events');
    await eventually(() => calls.length, (count) => count === 1, 10_000);
    // Subscribed again: a message published now arrives.
    await eventually(async () => (await probe.publish('bus-unit:events', 'after'), heard), (messages) => messages.includes('after'), 10_000);
    await kill('bus-unit');
    await eventually(() => calls.length, (count) => count === 2, 10_000);
    assert.deepEqual(calls, ['resync', 'resync']);
  });

  it('after Redis comes back empty, restores held state before anything re-reads', async () => {
    calls.length = 0;
    await redis.stop();
    await redis.start();
    await eventually(() => calls.includes('resync'), (done) => done, 20_000);
    assert.equal(calls[0], 'restore', `calls: ${calls.join(', ')}`);
    assert.equal(calls.filter((call) => call === 'restore').length, 1, `calls: ${calls.join(', ')}`);
  });
});

describe('an API instance\'s Redis connections', () => {
  const redis = new PrivateRedis();
  const prefix = 'bus-count';
  let api: RunningRouter;
  let probe: Redis;

  before(async () => {
    await redis.start();
    probe = new Redis(redis.url, { connectionName: 'test-probe' });
    api = await startRouter({ adminKey: ADMIN_KEY, redisUrl: redis.url, queue: { prefix } });
  });

  after(async () => {
    probe?.disconnect();
    await api?.close();
    await redis.stop();
  });

  it('are at most three, all named after the instance, with every kind of shared state in use', async () => {
    // Each store touched once, so a store that opened its own connection lazily would show.
    assert.equal((await admin(api, 'PUT', '/v1/catalog/sources/count', { tools: syntheticTools(3, 'count') })).status, 200);
    assert.equal((await admin(api, 'GET', '/v1/index/status')).status, 200);
    assert.equal((await admin(api, 'PUT', '/v1/search/settings', { weights: { bm25: 0.4, vector: 0.6 } })).status, 200);
    const tool = api.router.catalog.snapshot().entries.find((entry) => entry.source === 'count')!.tool.name;
    assert.equal((await admin(api, 'POST', '/v1/feedback', { query: 'create an invoice', tool })).status, 201);
    const { key } = await generateKey(api.url, {});
    assert.equal((await call(api.url, 'GET', '/v1/index/status', { key })).status, 200);

    const names = await clients(probe);
    process.stdout.write(`# one API instance holds ${names.length} Redis connections: ${names.join(', ')}\n`);
    assert.ok(names.length <= 3, `connections: ${names.join(', ')}`);
    for (const name of names) assert.match(name, new RegExp(`^toolrouter-api:${prefix}:`));
  });
});

describe('every kind of shared state converges after Redis restarts and an instance is cut off', () => {
  const redis = new PrivateRedis({ persistent: true });
  // Instance a reaches Redis through a link the test can cut; b and the worker connect directly.
  const link = new RedisLink(() => redis.port);
  const prefix = `bus-converge-${randomUUID().slice(0, 8)}`;
  const settings = (url: string) => ({ adminKey: ADMIN_KEY, redisUrl: url, queue: { prefix, backoffMs: 100, generationCheckMs: 500 } });
  let a: RunningRouter;
  let b: RunningRouter;
  let worker: WorkerProcess;
  let probe: Redis;

  /** What an instance serves of each kind of shared state (keys are checked by using them). */
  const state = async (api: RunningRouter) => {
    const status = (await admin(api, 'GET', '/v1/index/status')).body;
    const search = (await admin(api, 'GET', '/v1/search/settings')).body;
    return {
      sources: api.router.catalog.sourceNames().sort(),
      catalogHash: status.catalogHash as string,
      indexedHash: status.indexedHash as string,
      state: status.state as string,
      weights: search.weights as Record<string, number>,
      fusion: search.fusion as string,
      feedback: api.router.feedback!.size,
    };
  };
  const settled = (s: Awaited<ReturnType<typeof state>>) => s.state === 'ready' && s.indexedHash === s.catalogHash;

  before(async () => {
    await redis.start();
    await link.start();
    probe = new Redis(redis.url, { connectionName: 'test-probe' });
    probe.on('error', () => {});
    worker = new WorkerProcess(writeConfig(settings(redis.url)));
    await worker.ready();
    a = await startRouter(settings(link.url));
    b = await startRouter(settings(redis.url));
    assert.equal((await admin(b, 'PUT', '/v1/catalog/sources/base', { tools: syntheticTools(5, 'base') })).status, 200);
    const expected = await eventually(() => state(b), settled);
    await eventually(() => state(a), (s) => settled(s) && s.catalogHash === expected.catalogHash);
  });

  after(async () => {
    probe?.disconnect();
    await a?.close();
    await b?.close();
    await worker?.kill('SIGKILL');
    await link.close();
    await redis.stop();
  });

  it('an instance cut off while Redis restarted, and while everything changed, serves all of it once back', async () => {
    const early = await generateKey(b.url, {});
    // Seen by a while connected: a would go on answering it from its last known record while Redis is away.
    assert.equal((await call(a.url, 'GET', '/v1/index/status', { key: early.key })).status, 200);

    link.cut();
    await redis.stop();
    await redis.start();
    // b reconnects by itself; every change below goes through b while a cannot hear of it.
    await eventually(() => call(b.url, 'GET', '/ready'), (reply) => reply.body.checks?.redis?.ok === true, 30_000);
    assert.equal((await admin(b, 'PUT', '/v1/catalog/sources/late', { tools: syntheticTools(3, 'late') })).status, 200);
    assert.equal((await admin(b, 'DELETE', '/v1/catalog/sources/base')).status, 200);
    const late = await generateKey(b.url, {});
    assert.equal((await admin(b, 'POST', '/key/delete', { keys: [early.key_id] })).status, 200);
    assert.equal((await admin(b, 'PUT', '/v1/search/settings', { weights: { bm25: 0.2, vector: 0.8 }, fusion: 'rrf' })).status, 200);
    const tool = b.router.catalog.snapshot().entries.find((entry) => entry.source === 'late')!.tool.name;
    for (const query of ['archive the late report', 'export late files']) {
      assert.equal((await admin(b, 'POST', '/v1/feedback', { query, tool })).status, 201);
    }
    const expected = await eventually(() => state(b), settled, 60_000);
    assert.deepEqual([expected.weights.bm25, expected.weights.vector, expected.fusion], [0.2, 0.8, 'rrf']);

    // Still cut off: a has none of it (so the convergence below is a's doing, not the test's).
    const isolated = await state(a);
    assert.notEqual(isolated.catalogHash, expected.catalogHash);
    assert.notEqual(isolated.fusion, 'rrf');
    assert.equal(isolated.feedback, expected.feedback - 2);

    link.restore();
    const restoredAt = Date.now();
    const caughtUp = await eventually(() => state(a), (s) => JSON.stringify(s) === JSON.stringify(expected), 60_000);
    assert.deepEqual(caughtUp, expected);
    process.stdout.write(`# the cut-off instance served every change ${Date.now() - restoredAt} ms after its link came back\n`);
    // Keys: the new one works on a, the one deleted meanwhile no longer does.
    await eventually(() => call(a.url, 'GET', '/v1/index/status', { key: late.key }), (reply) => reply.status === 200, 20_000);
    assert.equal((await call(a.url, 'GET', '/v1/index/status', { key: early.key })).status, 401);
    const query = { query: 'late1', top_k: 3, mode: 'bm25' };
    const [ra, rb] = await Promise.all([admin(a, 'POST', '/v1/tools/search', query), admin(b, 'POST', '/v1/tools/search', query)]);
    assert.deepEqual(ra.body.results.map((hit: { name: string }) => hit.name), rb.body.results.map((hit: { name: string }) => hit.name));
  });

  it('after Redis restarts empty, the instances store their state again and a settings change reaches both', async () => {
    const before = await state(b);
    await redis.wipe();
    await redis.start();
    // Restored by the instances (the generation marker changed): the static source, and the applied settings.
    await eventually(() => probe.hkeys(`${prefix}:sources`).catch((): string[] => []), (sources) => sources.includes('late'), 30_000);
    await eventually(() => probe.exists(`${prefix}:search:settings`).catch(() => 0), (exists) => exists === 1, 30_000);
    // Without the version counter restored, this change would get version 1, which both instances ignore as old.
    const put = await admin(a, 'PUT', '/v1/search/settings', { weights: { bm25: 0.7, vector: 0.3 }, fusion: 'weighted' });
    assert.equal(put.status, 200);
    assert.deepEqual([put.body.weights.bm25, put.body.fusion], [0.7, 'weighted']);
    const [sa, sb] = await Promise.all(
      [a, b].map((api) => eventually(() => state(api), (s) => settled(s) && s.weights.bm25 === 0.7 && s.fusion === 'weighted', 60_000)),
    );
    assert.deepEqual(sa, sb);
    assert.equal(sb!.catalogHash, before.catalogHash);
  });
});
