import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { PrivateRedis } from '../helpers/redis-server.js';
import { REDIS_URL } from '../helpers/processes.js';
import { closeListening, fixtureTools } from '../helpers/router.js';
import { waitFor } from '../helpers/mcp.js';

interface Instance {
  url: string;
  router: Toolrouter;
  server: Server;
}

/** An API instance logging everything (debug) into `lines`, so the test can look for secrets in its logs. */
async function startInstance(overrides: Record<string, unknown>, lines: string[]): Promise<Instance> {
  const config = loadConfig({}, { port: 0, host: '127.0.0.1', adminKey: ADMIN_KEY, ...overrides });
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const router = await createToolrouter(config, { log: createLogger('debug', sink) });
  const server = await listen(router);
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, router, server };
}

async function stopInstance(instance: Instance | undefined): Promise<void> {
  await closeListening(instance?.router, instance?.server);
}

describe('keys in Redis, shared by every instance', () => {
  const prefix = `keys-${process.pid}-${Date.now()}`;
  const settings = { redisUrl: REDIS_URL, queue: { prefix }, catalog: { sources: { demo: fixtureTools() } } };
  const logs: string[] = [];
  let first: Instance;
  let second: Instance;
  const redis = new Redis(REDIS_URL);

  before(async () => {
    first = await startInstance(settings, logs);
    second = await startInstance(settings, logs);
  });

  after(async () => {
    await stopInstance(first);
    await stopInstance(second);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  test('a key made on one instance works on the other, and deleting it anywhere ends it everywhere', async () => {
    const made = await generateKey(first.url, { allowed_servers: ['demo'] });
    assert.equal((await call(second.url, 'GET', '/v1/catalog', { key: made.key })).status, 200);
    const listed = await call(second.url, 'GET', '/key/list', { key: ADMIN_KEY });
    assert.ok(listed.body.keys.some((key: { key_id: string }) => key.key_id === made.key_id));
    await call(second.url, 'POST', '/key/delete', { key: ADMIN_KEY, body: { keys: [made.key_id] } });
    assert.equal((await call(first.url, 'GET', '/v1/catalog', { key: made.key })).status, 401);
  });

  test('Redis holds a hash of each key, never the key; logs never show it', async () => {
    const made = await generateKey(first.url, { key_alias: 'logged' });
    await call(first.url, 'GET', '/v1/catalog', { key: made.key });
    await call(second.url, 'GET', '/v1/catalog', { headers: { 'x-toolrouter-key': made.key } });
    await call(second.url, 'GET', '/v1/catalog', { key: `${made.key}x` });
    const stored = JSON.stringify(await redis.hgetall(`${prefix}:keys`));
    assert.ok(stored.includes(made.key_id), 'the record is there');
    assert.ok(!stored.includes(made.key), 'the secret is not');
    assert.ok(logs.length > 0, 'the instances did log');
    for (const secret of [made.key, ADMIN_KEY]) {
      assert.deepEqual(logs.filter((line) => line.includes(secret)), [], 'a secret reached the log');
    }
  });

  test('a key\'s rate limit counts across instances', async () => {
    const limited = await generateKey(first.url, { rpm_limit: 4 });
    for (const instance of [first, second, first, second]) assert.equal((await call(instance.url, 'GET', '/v1/catalog', { key: limited.key })).status, 200);
    assert.equal((await call(second.url, 'GET', '/v1/catalog', { key: limited.key })).status, 429);
    assert.equal((await call(first.url, 'GET', '/v1/catalog', { key: limited.key })).status, 429);
  });
});

describe('keys while Redis is away', () => {
  const redis = new PrivateRedis();
  let api: Instance | undefined;

  after(async () => {
    await stopInstance(api);
    await redis.stop();
  });

  test('keys seen before keep working; new keys and key management answer 503 and change nothing', async () => {
    await redis.start();
    api = await startInstance({ redisUrl: redis.url, queue: { prefix: 'keys-outage' }, catalog: { sources: { demo: fixtureTools() } } }, []);
    const seen = await generateKey(api.url, { allowed_servers: ['demo'] });
    const unseen = await generateKey(api.url, {});
    assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: seen.key })).status, 200);

    await redis.stop();
    assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: seen.key })).status, 200, 'a known key is served from its last known record');
    const unknown = await call(api.url, 'GET', '/v1/catalog', { key: unseen.key });
    assert.equal(unknown.status, 503);
    assert.equal(unknown.body.error.code, 'redis_unavailable');
    const generate = await call(api.url, 'POST', '/key/generate', { key: ADMIN_KEY, body: {} });
    assert.equal(generate.status, 503);
    assert.equal((await call(api.url, 'GET', '/v1/catalog', { key: ADMIN_KEY })).status, 200, 'the admin key needs no Redis');

    await redis.start();
    // Until the instance has reconnected, known keys are served from memory (failing fast instead of waiting on Redis).
    await waitFor('the instance to reconnect to Redis', async () => (await call(api!.url, 'GET', '/ready')).body.checks?.redis?.ok === true, 20_000);
    // A restarted Redis without persistence has lost the keys: they are refused, not served from memory.
    const lost = await call(api.url, 'GET', '/v1/catalog', { key: seen.key });
    assert.ok(lost.status === 401 || lost.status === 503, `after restart: ${lost.status}`);
  });
});
