/**
 * The audit trail in Redis: appends from several processes (as several API instances) keep one hash chain;
 * `toolrouter audit verify` passes on it and names the first broken record once one is removed; with
 * `audit.required` a stopped Redis fails calls closed until it is back, and nothing queued is lost.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { ChainVerifier } from '../../src/audit/chain.js';
import { AuditLog } from '../../src/audit/log.js';
import { RedisAuditStore } from '../../src/audit/redis-store.js';
import type { AuditRecord } from '../../src/audit/types.js';
import { connectRedis, RedisKeys } from '../../src/redis/connection.js';
import { CLI, runToEnd } from '../helpers/ops-processes.js';
import { REDIS_URL } from '../helpers/processes.js';
import { PrivateRedis } from '../helpers/redis-server.js';

function configFor(prefix: string, url = REDIS_URL): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'tr-audit-cli-')), 'toolrouter.yaml');
  writeFileSync(file, `redis:\n  url: ${url}\nqueue:\n  prefix: ${prefix}\n`);
  return file;
}

describe('audit trail in Redis', { timeout: 120_000 }, () => {
  const prefix = `traudit${process.pid}`;
  const redis = new Redis(REDIS_URL);

  after(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('three writer processes appending at once keep one intact chain, every record kept', async () => {
    const writers = ['a', 'b', 'c'].map((instance) => runToEnd(['--import', 'tsx', 'test/fixtures/audit-writer.ts', REDIS_URL, prefix, instance, '200']));
    for (const result of await Promise.all(writers)) assert.equal(result.code, 0, result.stderr);
    const store = new RedisAuditStore({ redis, keys: new RedisKeys(prefix), maxEntries: 1_000_000, maxAgeDays: 30 });
    const verifier = new ChainVerifier();
    const instances = new Map<string, number>();
    let broken;
    for await (const record of store.scan()) {
      broken ??= verifier.check(record);
      instances.set(record.instance, (instances.get(record.instance) ?? 0) + 1);
    }
    assert.equal(broken, undefined);
    assert.equal(verifier.checked, 600);
    assert.deepEqual(Object.fromEntries(instances), { a: 200, b: 200, c: 200 });
  });

  it('toolrouter audit verify passes, and after one record is removed fails naming the record after it', async () => {
    const config = configFor(prefix);
    const intact = await runToEnd([...CLI, 'audit', 'verify'], { TOOLROUTER_CONFIG: config });
    assert.equal(intact.code, 0, intact.stderr);
    assert.match(intact.stdout, /intact: 600 record/);

    const entries = await redis.xrange(`${prefix}:audit`, '-', '+', 'COUNT', 300);
    const [removed] = entries[250]!;
    const [next] = entries[251]!;
    await redis.xdel(`${prefix}:audit`, removed);
    const broken = await runToEnd([...CLI, 'audit', 'verify'], { TOOLROUTER_CONFIG: config });
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, new RegExp(`broken at record ${next}`));

    const exported = await runToEnd([...CLI, 'audit', 'export'], { TOOLROUTER_CONFIG: config });
    assert.equal(exported.code, 0, exported.stderr);
    const lines = exported.stdout.trim().split('\n').map((line) => JSON.parse(line) as AuditRecord);
    assert.equal(lines.length, 599);
    assert.ok(lines.every((record) => /^sha256:/.test(String(record.arguments))));
  });
});

describe('audit.required with Redis away', { timeout: 120_000 }, () => {
  // With its append-only file, as production runs it: what was written before the stop is there after it.
  const server = new PrivateRedis({ persistent: true });
  before(() => server.start());
  after(() => server.stop());

  it('fails closed while Redis is down and writes what was queued once it is back', async () => {
    const redis = connectRedis({ url: server.url } as never, 'audit-required-test');
    const store = new RedisAuditStore({ redis, keys: new RedisKeys('trreq'), maxEntries: 10_000, maxAgeDays: 30 });
    const log = new AuditLog({ store, instance: 'i1', settings: { arguments: 'off', queueSize: 100, required: true }, retryMs: 100 });
    const attempt = (ms: number) =>
      log.record({ time: new Date().toISOString(), surface: 'rest', action: 'call_tool', caller: { kind: 'admin', id: 'admin', groups: [] }, tool: 't', decision: 'permit', policies: [], outcome: 'ok', ms });
    try {
      attempt(1);
      assert.equal(await log.flush(), true);
      await server.stop();
      attempt(2);
      const deadline = Date.now() + 10_000;
      while (log.accepting() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(log.accepting(), false, 'calls fail closed while the store cannot take records');
      await server.start();
      assert.equal(await log.flush(20_000), true);
      assert.equal(log.accepting(), true);
      const records: AuditRecord[] = [];
      for await (const record of store.scan()) records.push(record);
      assert.deepEqual(records.map((record) => record.ms), [1, 2]);
      const verifier = new ChainVerifier();
      assert.deepEqual(records.map((record) => verifier.check(record)), [undefined, undefined]);
    } finally {
      await log.close();
      redis.disconnect();
    }
  });
});
