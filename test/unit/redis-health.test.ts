import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/config.js';
import { RedisBus } from '../../src/redis/bus.js';
import { RedisKeys } from '../../src/redis/connection.js';
import { keySlot } from '../../src/redis/health.js';
import { PrivateRedis } from '../helpers/redis-server.js';

describe('keySlot', () => {
  it('computes Redis Cluster hash slots, hash tags included', () => {
    // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
    assert.equal(keySlot('foo'), 12182);
    assert.equal(keySlot('bar'), 5061);
    assert.equal(keySlot('123456789'), 12739);
    assert.equal(keySlot('{user1000}.following'), keySlot('{user1000}.followers'));
    assert.equal(keySlot('{toolrouter}:keys'), keySlot('toolrouter'));
    assert.equal(keySlot('foo{}{bar}'), keySlot('foo{}{bar}'), 'an empty tag hashes the whole key');
    assert.notEqual(keySlot('foo{}{bar}'), keySlot('bar'));
  });
});

describe('redis.commandTimeoutMs and redis.healthCheckMs', () => {
  it('are settings with bounds', () => {
    const config = loadConfig({}, { redis: { url: 'redis://127.0.0.1:6379', commandTimeoutMs: 1500, healthCheckMs: 500 } });
    assert.equal(config.redis.commandTimeoutMs, 1500);
    assert.throws(() => loadConfig({}, { redis: { url: 'redis://127.0.0.1:6379', commandTimeoutMs: 5 } }), /commandTimeoutMs/);
    assert.throws(() => loadConfig({}, { redis: { url: 'redis://127.0.0.1:6379', commandTimeoutMs: 'soon' } }), /commandTimeoutMs/);
  });
});

describe('RedisHealth and the write gate on a real Redis that goes away', () => {
  const redis = new PrivateRedis({ persistent: true });
  const keys = new RedisKeys(`trtest-health-${process.pid}`);
  let bus: RedisBus;
  const gauge = { value: -1, set(value: number) { this.value = value; } };

  before(async () => {
    await redis.start();
    bus = new RedisBus({ redis: { url: redis.url, commandTimeoutMs: 300, healthCheckMs: 100 }, keys, log: pino({ level: 'silent' }), connectionName: 'health-test', healthGauge: gauge });
    await bus.redis.ping();
  });
  after(async () => {
    await bus?.close();
    await redis.stop();
  });

  it('probes with a keyed write and read, and writes go through', async () => {
    assert.deepEqual(await bus.health.check(), { ok: true });
    assert.equal(gauge.value, 1);
    const probeKeys = await bus.redis.keys(`${keys.prefix}:health:*`);
    assert.equal(probeKeys.length, 1, 'the probe wrote its own key under the prefix');
    assert.ok((await bus.redis.pttl(probeKeys[0]!)) > 0, 'and it expires');
    await bus.writes.run('storing', (client) => client.set(keys.key('written'), 'before'));
  });

  it('while Redis is down: the probe fails, a write is refused within the budget and never sent', async () => {
    await redis.stop();
    const check = await bus.health.check();
    assert.equal(check.ok, false);
    // Either the connection already knows (not connected) or the write went out just as Redis died (no answer).
    assert.match(check.detail!, /not connected|no answer|failed/);
    assert.equal(gauge.value, 0);
    const started = performance.now();
    await assert.rejects(
      bus.writes.run('storing the source', (client) => client.set(keys.key('written'), 'during')),
      (error: Error & { code?: string }) => error.code === 'redis_unavailable' && /nothing was changed/.test(error.message),
    );
    const elapsed = performance.now() - started;
    // Bounded by commandTimeoutMs (300 ms) plus scheduling; ioredis alone would hold it through its reconnect retries.
    assert.ok(elapsed < 2_000, `refused after ${Math.round(elapsed)} ms`);

    await redis.start();
    // The probe (every 100 ms once started) sees Redis back; the refused write was not queued for later.
    bus.health.start();
    for (const deadline = Date.now() + 10_000; !(await bus.health.check()).ok; ) {
      if (Date.now() > deadline) throw new Error('the probe did not recover');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(gauge.value, 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(await bus.redis.get(keys.key('written')), 'before', 'the refused write never reached Redis');
    await bus.writes.run('storing', (client) => client.set(keys.key('written'), 'after'));
    assert.equal(await bus.redis.get(keys.key('written')), 'after');
  });
});
