import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import pino from 'pino';
import { RedisFeedbackStore } from '../../src/feedback/store.js';
import { DAY_MS, type FeedbackEvent } from '../../src/feedback/types.js';
import { RedisKeys } from '../../src/redis/connection.js';
import { RedisBus } from '../../src/redis/bus.js';
import { eventually, REDIS_URL, WorkerProcess, writeConfig } from '../helpers/processes.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';

/** Feedback shared through Redis: real Redis, real worker process, real API instances; each run under its own prefix. */
describe('feedback with Redis', () => {
  const prefix = `trtest-fb-${randomUUID().slice(0, 8)}`;
  const keys = new RedisKeys(prefix);
  const redis = new Redis(REDIS_URL);
  const log = pino({ level: 'silent' });

  after(async () => {
    const leftovers = [...(await redis.keys(`${prefix}*`)), ...(await redis.keys(`bull:${keys.indexQueue}:*`))];
    if (leftovers.length > 0) await redis.del(...leftovers);
    redis.disconnect();
  });

  describe('store', () => {
    const storeKeys = new RedisKeys(`${prefix}-store`);
    let now = 1_000 * DAY_MS;
    // One bus per store, as one per process: the store closes with its bus.
    const buses: RedisBus[] = [];
    after(async () => {
      for (const bus of buses) await bus.close();
    });
    const open = () => {
      const bus = new RedisBus({ url: REDIS_URL, keys: storeKeys, log, connectionName: `${prefix}-store-${buses.length}` });
      buses.push(bus);
      return new RedisFeedbackStore(bus, { maxEvents: 3, maxAgeDays: 10 }, log, () => now);
    };
    const event = (tool: string, time: number): FeedbackEvent => ({
      id: randomUUID(),
      query: `query for ${tool}`,
      embedding: new Float32Array([0.6, 0.8, 0]),
      model: 'm',
      tool,
      relevant: true,
      time,
      scope: 'key-1',
    });

    it('keeps the newest maxEvents events, none older than maxAgeDays, across store restarts', async () => {
      const store = open();
      await store.start(() => {});
      await store.append(event('too-old', now - 11 * DAY_MS));
      for (const tool of ['a', 'b', 'c', 'd']) await store.append(event(tool, now));
      await store.close();
      assert.equal(await redis.zcard(storeKeys.feedbackEvents), 3);

      const reopened = open();
      const loaded = await reopened.start(() => {});
      assert.deepEqual(loaded.map((stored) => stored.tool), ['b', 'c', 'd']);
      const first = loaded[0]!;
      assert.deepEqual([...first.embedding].map((x) => Number(x.toFixed(6))), [0.6, 0.8, 0]);
      assert.equal(first.query, 'query for b');
      assert.equal(first.scope, 'key-1');
      // Ten days later the events have aged out: neither loaded nor kept by the next append.
      now += 10 * DAY_MS + 1;
      await reopened.close();
      const later = open();
      assert.deepEqual(await later.start(() => {}), []);
      await later.append(event('e', now));
      assert.equal(await redis.zcard(storeKeys.feedbackEvents), 1);
      await later.close();
    });

    it('announces appends to the other stores, not back to the writer', async () => {
      const writer = open();
      const reader = open();
      const heardByWriter: string[] = [];
      const heardByReader: string[] = [];
      await writer.start((heard) => heardByWriter.push(heard.tool));
      await reader.start((heard) => heardByReader.push(heard.tool));
      await writer.append(event('announced', now));
      await eventually(() => heardByReader, (heard) => heard.includes('announced'), 10_000);
      assert.deepEqual(heardByWriter, []);
      await writer.close();
      await reader.close();
    });
  });

  describe('API instances', () => {
    const settings = { redisUrl: REDIS_URL, queue: { prefix, attempts: 3, backoffMs: 200, lockDurationMs: 3_000, stalledIntervalMs: 1_000 } };
    const routers: RunningRouter[] = [];
    let worker: WorkerProcess;
    const query = 'tell the team that the release is out';

    const ready = (api: RunningRouter) =>
      eventually(
        async () => (await api.request('GET', '/v1/index/status')).body,
        (status) => status.state === 'ready' && status.indexedHash === status.catalogHash && status.tools > 0,
      );
    const startApi = async () => {
      const api = await startRouter(settings);
      routers.push(api);
      return api;
    };
    // The ranking with feedback is under test, so every candidate is asked for (min_score 0, no abstention).
    const ranked = async (api: RunningRouter, q = query) =>
      (await api.post('/v1/tools/search', { query: q, top_k: 10, min_score: 0 })).body.results as { name: string; scores: { feedback?: number } }[];

    before(async () => {
      worker = new WorkerProcess(writeConfig({ ...settings, logLevel: 'info' }));
      await worker.ready();
    });
    after(async () => {
      for (const api of routers) await api.close().catch(() => {});
      await worker?.kill('SIGTERM');
    });

    it('keeps the boost across a restart of the API, and shares new events with running instances', async () => {
      const first = await startApi();
      assert.equal((await first.request('PUT', '/v1/catalog/sources/demo', { tools: fixtureTools() })).status, 200);
      await ready(first);
      const zeroShot = await ranked(first);
      const called = zeroShot[4]!.name;
      for (let i = 0; i < 4; i++) assert.equal((await first.post('/v1/feedback', { query, tool: called })).status, 201);
      assert.equal((await ranked(first))[0]!.name, called);
      await first.close();

      const restarted = await startApi();
      await ready(restarted);
      assert.equal(restarted.router.feedback!.size, 4, 'events loaded from Redis');
      const after = await ranked(restarted);
      assert.equal(after[0]!.name, called, after.map((hit) => hit.name).join(', '));
      assert.ok(after[0]!.scores.feedback! > 0.99);

      // A second running instance hears events recorded through the first.
      const other = await startApi();
      await ready(other);
      const q2 = 'what is the weather forecast for Lisbon';
      const target = (await ranked(other, q2))[6]!.name;
      for (let i = 0; i < 4; i++) assert.equal((await restarted.post('/v1/feedback', { query: q2, tool: target })).status, 201);
      await eventually(() => other.router.feedback!.size, (size) => size === 8, 10_000);
      assert.equal((await ranked(other, q2))[0]!.name, target);
    });
  });
});
