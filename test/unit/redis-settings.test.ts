import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { maskSecrets } from '../../src/config/check.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { describeRedis, RedisKeys } from '../../src/redis/connection.js';

function configFile(text: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'toolrouter-redis-settings-')), 'config.yaml');
  writeFileSync(file, text);
  return file;
}

function problems(run: () => unknown): string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  assert.fail('the configuration was accepted');
}

describe('redis settings', () => {
  it('reads each form from the environment', () => {
    assert.deepEqual(loadConfig({ REDIS_URL: 'rediss://:pw@cache.example:6380/2' }).redis, { url: 'rediss://:pw@cache.example:6380/2' });
    assert.deepEqual(loadConfig({ REDIS_SENTINELS: 'a:26379, b:26379', REDIS_SENTINEL_NAME: 'main', REDIS_PASSWORD: 'pw' }).redis, {
      sentinel: { sentinels: ['a:26379', 'b:26379'], name: 'main', password: 'pw' },
    });
    assert.deepEqual(loadConfig({ REDIS_CLUSTER_NODES: 'redis://a:7000,redis://b:7001' }).redis, { cluster: { nodes: ['redis://a:7000', 'redis://b:7001'] } });
    assert.deepEqual(loadConfig({ REDIS_URL: 'rediss://r:6380', REDIS_TLS_CA: '/ca.pem', REDIS_TLS_SERVERNAME: 'r.internal' }).redis, {
      url: 'rediss://r:6380',
      tls: { ca: '/ca.pem', servername: 'r.internal' },
    });
    assert.deepEqual(loadConfig({}).redis, {}, 'no Redis');
  });

  it('keeps the older top-level redisUrl working, from a file and from overrides', () => {
    assert.equal(loadConfig({ TOOLROUTER_CONFIG: configFile('redisUrl: redis://old:6379\n') }).redis.url, 'redis://old:6379');
    assert.equal(loadConfig({}, { redisUrl: 'redis://override:6379' }).redis.url, 'redis://override:6379');
    assert.equal((loadConfig({}, { redisUrl: 'redis://x:1' }) as Record<string, unknown>).redisUrl, undefined, 'one place to read it');
  });

  it('lets a later layer replace the form of an earlier one instead of conflicting', () => {
    const file = configFile('redis:\n  cluster: { nodes: [redis://a:7000] }\n  tls: { servername: r.internal }\n');
    assert.deepEqual(loadConfig({ TOOLROUTER_CONFIG: file, REDIS_URL: 'rediss://b:6380' }).redis, { url: 'rediss://b:6380', tls: { servername: 'r.internal' } });
    assert.deepEqual(loadConfig({ TOOLROUTER_CONFIG: file }).redis.cluster, { nodes: ['redis://a:7000'] });
  });

  it('names the field of every mistake', () => {
    const both = configFile('redis:\n  url: redis://a:6379\n  cluster: { nodes: [redis://b:7000] }\n');
    assert.ok(problems(() => loadConfig({ TOOLROUTER_CONFIG: both })).some((p) => p.startsWith('redis:') && p.includes('not url and cluster')));
    assert.ok(problems(() => loadConfig({ REDIS_URL: 'http://a:6379' })).some((p) => p.startsWith('redis.url:') && p.includes('redis://')));
    assert.ok(problems(() => loadConfig({ REDIS_SENTINELS: 'a', REDIS_SENTINEL_NAME: 'm' })).some((p) => p.startsWith('redis.sentinel.sentinels.0:')));
    assert.ok(problems(() => loadConfig({ REDIS_SENTINELS: 'a:1' })).some((p) => p.startsWith('redis.sentinel.name:')));
    assert.ok(problems(() => loadConfig({ REDIS_URL: 'rediss://a:1', REDIS_TLS_CERT: '/c.pem' })).some((p) => p.startsWith('redis.tls:') && p.includes('cert and key')));
    assert.ok(problems(() => loadConfig({}, { redis: { cluster: { nodes: [] } } })).some((p) => p.startsWith('redis.cluster.nodes:')));
  });

  it('says which form is in use without its secrets', () => {
    assert.equal(describeRedis({ url: 'redis://user:secret@r:6379' }), 'Redis at redis://user:***@r:6379');
    assert.equal(describeRedis({ url: 'rediss://:secret@r:6380', tls: { ca: '/ca' } }), 'Redis at rediss://:***@r:6380 over TLS');
    assert.equal(describeRedis({ sentinel: { sentinels: ['a:26379'], name: 'main', password: 'secret' } }), 'Redis master "main" via Sentinel a:26379');
    assert.equal(describeRedis({ cluster: { nodes: ['redis://:secret@a:7000', 'redis://a:7001'] } }), 'Redis Cluster via redis://:***@a:7000, redis://a:7001');
    assert.match(describeRedis({}), /^no Redis/);
    const masked = JSON.stringify(maskSecrets(loadConfig({ REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'm', REDIS_PASSWORD: 'secret1', REDIS_SENTINEL_PASSWORD: 'secret2' })));
    assert.ok(!masked.includes('secret1') && !masked.includes('secret2'), masked);
  });
});

describe('RedisKeys hash slots', () => {
  /** Every key and channel RedisKeys names, with sample arguments. */
  function everyName(keys: RedisKeys): string[] {
    const names: string[] = [];
    for (const [member, descriptor] of Object.entries(Object.getOwnPropertyDescriptors(RedisKeys.prototype))) {
      if (member === 'constructor' || member === 'bullPrefix' || member === 'indexQueue') continue;
      if (descriptor.get) names.push(descriptor.get.call(keys) as string);
      else if (typeof descriptor.value === 'function') names.push((descriptor.value as (...args: string[]) => string).call(keys, 'a', 'b'));
    }
    return names;
  }

  it('leaves single-node and Sentinel names as they were, so an upgrade reads the stored data', () => {
    const keys = RedisKeys.of('toolrouter', { url: 'redis://r:6379' });
    assert.equal(keys.prefix, 'toolrouter');
    assert.equal(keys.catalogSnapshot('h'), 'toolrouter:catalog:h');
    assert.equal(keys.apiKeys, 'toolrouter:keys');
    assert.equal(keys.bullPrefix, 'bull');
    assert.equal(keys.indexQueue, 'toolrouter-index');
    assert.equal(RedisKeys.of('toolrouter', { sentinel: { sentinels: ['a:1'], name: 'm' } }).prefix, 'toolrouter');
  });

  it('puts every key and channel of a deployment on a cluster in one slot, the queue included', () => {
    const keys = RedisKeys.of('toolrouter', { cluster: { nodes: ['redis://a:7000'] } });
    assert.equal(keys.prefix, '{toolrouter}');
    assert.equal(keys.bullPrefix, 'bull:{toolrouter}');
    assert.equal(keys.indexQueue, 'toolrouter-index', 'the queue name stays readable; the prefix carries the tag');
    const names = everyName(keys);
    assert.ok(names.length >= 20, `${names.length} names`);
    for (const name of names) assert.ok(name.startsWith('{toolrouter}:'), `${name} is in the deployment's slot`);
    assert.equal(keys.key('mcp', 'servers'), '{toolrouter}:mcp:servers');
  });

  it('takes a prefix that carries its own tag as it is', () => {
    const keys = RedisKeys.of('{tr}-prod', { cluster: { nodes: ['redis://a:7000'] } });
    assert.equal(keys.prefix, '{tr}-prod');
    assert.equal(keys.apiKeys, '{tr}-prod:keys');
  });
});
