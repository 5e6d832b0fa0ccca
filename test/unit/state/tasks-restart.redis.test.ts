/**
 * Issue 54 / 56: a task whose end comes while Redis is away (killed, restarting with its append-only file) or refuses
 * writes (out of memory) still ends with its result once Redis takes writes again, on a real redis-server of the test's own; a reader meanwhile gets
 * RedisUnavailableError (the faces' retryable error), never a raw Redis error; and the instance running it is not taken
 * for gone because every heartbeat lapsed during the outage.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { GatewayTasks, DEFAULT_TASKS_OPTIONS } from '../../../src/mcp/relay/tasks.js';
import { RedisBus } from '../../../src/redis/bus.js';
import { RedisKeys, RedisUnavailableError } from '../../../src/redis/connection.js';
import { RedisInstances } from '../../../src/state/redis/instances.js';
import { RedisTaskStore } from '../../../src/state/redis/tasks.js';
import { PrivateRedis } from '../../helpers/redis-server.js';
import { waitFor } from '../../helpers/mcp.js';

const log = pino({ level: 'silent' });

describe('tasks across a Redis restart (AOF)', { timeout: 120_000 }, () => {
  const redis = new PrivateRedis({ persistent: true });
  const buses: RedisBus[] = [];
  const registries: RedisInstances[] = [];
  let running: GatewayTasks;
  let reader: GatewayTasks;

  before(async () => {
    await redis.start();
    const keys = new RedisKeys('trrestart');
    // Short heartbeats, so an outage of a few seconds outlasts every heartbeat's TTL.
    const options = { log, heartbeatTtlMs: 600, heartbeatIntervalMs: 150 };
    for (const name of ['runs', 'reads']) {
      const bus = new RedisBus({ url: redis.url, keys, log, connectionName: `test-restart-${name}` });
      buses.push(bus);
      registries.push(await RedisInstances.start(bus, options));
    }
    running = new GatewayTasks({ ...DEFAULT_TASKS_OPTIONS, maxPendingWrites: 100 }, { store: new RedisTaskStore(buses[0]!.redis, keys), instances: registries[0]! });
    reader = new GatewayTasks(DEFAULT_TASKS_OPTIONS, { store: new RedisTaskStore(buses[1]!.redis, keys), instances: registries[1]! });
  });

  after(async () => {
    for (const registry of registries) await registry.close();
    for (const bus of buses) await bus.close();
    await redis.stop();
  });

  it('a task that ends while Redis is down reads completed, with its result, on another instance after the restart', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let progressed!: () => void;
    const task = await running.start('alice', undefined, async (_signal, taskId) => {
      await released;
      // Its status and its end are both written while Redis is away: kept, in order.
      void running.progress(taskId, 'input_required', { ask: { method: 'elicitation/create', params: { message: 'x' } } });
      progressed();
      return { content: [{ type: 'text', text: 'the answer' }] };
    });
    assert.equal((await reader.get('alice', task.taskId))?.task.status, 'working');

    await redis.stop();
    const didProgress = new Promise<void>((resolve) => (progressed = resolve));
    release();
    await didProgress;
    // The write failed and is kept (ioredis gives up on a command after its retries while Redis is down).
    await waitFor('the end kept for later', async () => running.pending.size > 0, 30_000);
    await assert.rejects(reader.get('alice', task.taskId), (error: unknown) => {
      assert.ok(error instanceof RedisUnavailableError, String(error));
      return true;
    });
    // Longer than the heartbeats' TTL: every heartbeat has lapsed when Redis comes back.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await redis.start();

    const done = await waitFor('completed after the restart', async () => {
      try {
        const record = await reader.get('alice', task.taskId);
        return record?.task.status === 'completed' ? record : undefined;
      } catch {
        return undefined;
      }
    }, 30_000);
    assert.deepEqual(done.result, { content: [{ type: 'text', text: 'the answer' }] });
    assert.equal(done.inputRequests, undefined, 'the status written before the end did not outlive it');
    // Its own reply may come a moment after another connection already reads the write.
    await waitFor('nothing kept any more', () => running.pending.size === 0, 10_000);
  });

  it('a task that ends while Redis refuses writes (out of memory) reads completed once it takes them again, never failed meanwhile', async () => {
    const admin = buses[1]!.redis;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const task = await running.start('bob', undefined, async () => {
      await released;
      return { content: [{ type: 'text', text: 'written late' }] };
    });
    // Every write refused (noeviction, the default), reads still answered: heartbeats lapse everywhere.
    await admin.config('SET', 'maxmemory', '1');
    try {
      release();
      await waitFor('the end kept for later', async () => running.pending.size > 0, 30_000);
      const seen = new Set<string>();
      // Longer than a heartbeat's TTL and its confirmation: a reader that judged by heartbeats alone would fail it.
      for (const deadline = Date.now() + 2_500; Date.now() < deadline; ) {
        const record = await reader.get('bob', task.taskId).catch((error: unknown) => {
          assert.ok(error instanceof RedisUnavailableError, String(error));
          return undefined;
        });
        if (record) seen.add(record.task.status);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.deepEqual([...seen], ['working'], 'read as running while its end could not be written');
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    const done = await waitFor('completed once Redis takes writes', async () => {
      const record = await reader.get('bob', task.taskId).catch(() => undefined);
      return record && record.task.status !== 'working' ? record : undefined;
    }, 30_000);
    assert.equal(done.task.status, 'completed', JSON.stringify(done.task));
    assert.deepEqual(done.result, { content: [{ type: 'text', text: 'written late' }] });
  });
});
