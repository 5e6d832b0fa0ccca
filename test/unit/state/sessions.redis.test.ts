/**
 * The SessionStore contract, run over the memory store and the Redis store (real Redis, a private key prefix): what a
 * 2025-era MCP session leaves behind, its TTL refreshed on use, per-holder counts, and signals between instances.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { RedisBus } from '../../../src/redis/bus.js';
import { RedisKeys } from '../../../src/redis/connection.js';
import { RedisSessionStore } from '../../../src/state/redis/sessions.js';
import { MemorySessionStore, type SessionRecord, type SessionSignal, type SessionStore, type SessionTtl } from '../../../src/state/sessions.js';
import { REDIS_URL } from '../../helpers/processes.js';
import { overRedisForms } from '../../helpers/redis-contract.js';

const prefix = `trtest-sessions-${process.pid}-${randomUUID().slice(0, 8)}`;
const buses: RedisBus[] = [];

function record(overrides: Partial<SessionRecord> = {}): SessionRecord {
  return {
    id: randomUUID(),
    protocolVersion: '2025-11-25',
    clientInfo: { name: 'contract-client', version: '1.0.0' },
    clientCapabilities: { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } },
    owner: 'key-a',
    holder: 'key-a',
    subscriptions: [],
    used: false,
    lastActive: Date.now(),
    ...overrides,
  };
}

const variants: { name: string; open(ttl: SessionTtl): { store: SessionStore; peer?: SessionStore } }[] = [
  { name: 'memory', open: (ttl) => ({ store: new MemorySessionStore(ttl) }) },
  {
    name: 'redis',
    open: (ttl) => {
      // Two buses on one prefix: two instances sharing one Redis.
      const keys = new RedisKeys(`${prefix}-${buses.length}`);
      const [one, two] = [0, 1].map((n) => new RedisBus({ url: REDIS_URL, keys, log: pino({ level: 'silent' }), connectionName: `${prefix}-${buses.length}-${n}` }));
      buses.push(one!, two!);
      return { store: new RedisSessionStore(one!, ttl), peer: new RedisSessionStore(two!, ttl) };
    },
  },
];

after(async () => {
  const redis = new Redis(REDIS_URL);
  const leftovers = await redis.keys(`${prefix}*`);
  if (leftovers.length > 0) await redis.del(...leftovers);
  redis.disconnect();
  await Promise.all(buses.map((bus) => bus.close()));
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function sessionContract(variant: (typeof variants)[number]): void {
  describe(`SessionStore (${variant.name})`, () => {
    it('keeps what a session is, as stored, and reads it from another instance', async () => {
      const { store, peer = store } = variant.open({ idleMs: 60_000 });
      const made = record({ clientInfo: { name: 'claude', version: '2.1', title: 'Claude' } });
      await store.create(made);
      assert.deepEqual(await peer.get(made.id), made);
      assert.equal(await peer.get(randomUUID()), undefined);
    });

    it('applies changes on touch, refreshes lastActive, and keeps fields changed elsewhere', async () => {
      const { store, peer = store } = variant.open({ idleMs: 60_000 });
      const made = record({ lastActive: Date.now() - 5_000 });
      await store.create(made);
      const levelled = await peer.touch(made.id, { logLevel: 'warning', used: true });
      assert.equal(levelled?.logLevel, 'warning');
      assert.equal(levelled?.used, true);
      assert.ok(levelled!.lastActive > made.lastActive);
      const subscribed = await store.touch(made.id, { subscriptions: ['file:///a', 'file:///b'] });
      assert.deepEqual(subscribed?.subscriptions, ['file:///a', 'file:///b']);
      assert.equal(subscribed?.logLevel, 'warning', 'a change on one instance does not undo one made on another');
      const emptied = await peer.touch(made.id, { subscriptions: [] });
      assert.deepEqual(emptied?.subscriptions, []);
      assert.deepEqual((await store.get(made.id))?.clientCapabilities, made.clientCapabilities);
      assert.equal(await store.touch(randomUUID()), undefined);
    });

    it('expires an idle session, sooner while unused; touching keeps it', async () => {
      const { store, peer = store } = variant.open({ idleMs: 1_200, unusedIdleMs: 300 });
      const unused = record();
      const used = record({ used: true });
      await store.create(unused);
      await store.create(used);
      for (let i = 0; i < 4; i++) {
        await sleep(350);
        assert.ok(await peer.touch(used.id), 'touched sessions stay');
      }
      assert.equal(await peer.get(unused.id), undefined, 'an unused session expired after its shorter TTL');
      await sleep(1_400);
      assert.equal(await store.get(used.id), undefined, 'an idle session expired');
    });

    it('counts sessions per holder across instances, without ended or expired ones', async () => {
      const { store, peer = store } = variant.open({ idleMs: 60_000, unusedIdleMs: 300 });
      const holder = `holder-${randomUUID()}`;
      const kept = [record({ holder, used: true }), record({ holder, used: true })];
      const expiring = record({ holder });
      for (const made of [...kept, expiring]) await store.create(made);
      await peer.create(record({ holder: `${holder}-other`, used: true }));
      assert.equal(await peer.count(holder), 3);
      assert.equal(await peer.delete(kept[0]!.id), true);
      assert.equal(await peer.delete(kept[0]!.id), false, 'a second delete finds nothing');
      assert.equal(await store.get(kept[0]!.id), undefined);
      await sleep(450);
      assert.equal(await store.count(holder), 1);
    });

    it('refuses records beyond the bounds', async () => {
      const { store } = variant.open({ idleMs: 60_000 });
      await assert.rejects(store.create(record({ clientCapabilities: { huge: 'x'.repeat(20_000) } })), /at most/);
      const made = record();
      await store.create(made);
      await assert.rejects(
        store.touch(made.id, { subscriptions: Array.from({ length: 101 }, (_, n) => `file:///${n}`) }),
        /at most 100 subscriptions/,
      );
      assert.deepEqual((await store.get(made.id))?.subscriptions, []);
    });

    it('carries signals to the listening instance', async () => {
      const { store, peer = store } = variant.open({ idleMs: 60_000 });
      const heard: SessionSignal[] = [];
      await peer.listen((signal) => heard.push(signal));
      const notify: SessionSignal = { type: 'notify', session: 's1', message: { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'file:///a' } } };
      await store.publish({ type: 'ended', session: 's1' });
      await store.publish(notify);
      for (let i = 0; i < 100 && heard.length < 2; i++) await sleep(20);
      assert.deepEqual(heard, [{ type: 'ended', session: 's1' }, notify]);
    });
  });
}

for (const variant of variants) sessionContract(variant);

// The same contract on the suite's Redis Cluster (hash-tagged keys), each instance with its own bus.
overRedisForms('session', (label, _redis, prefix, hashTag, settings) => {
  const opened: RedisBus[] = [];
  after(async () => {
    for (const bus of opened.splice(0)) await bus.close();
  });
  if (!hashTag) return; // the single Redis runs above, with its leftovers removed
  sessionContract({
    name: label,
    open: (ttl) => {
      const keys = new RedisKeys(prefix(), { hashTag });
      const [one, two] = [0, 1].map((n) => new RedisBus({ redis: settings(), keys, log: pino({ level: 'silent' }), connectionName: `sessions-cluster-${opened.length}-${n}` }));
      opened.push(one!, two!);
      return { store: new RedisSessionStore(one!, ttl), peer: new RedisSessionStore(two!, ttl) };
    },
  });
});
