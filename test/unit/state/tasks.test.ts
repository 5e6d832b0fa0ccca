import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import type { Task } from '@modelcontextprotocol/sdk/types.js';
import pino from 'pino';
import { RedisBus } from '../../../src/redis/bus.js';
import { RedisKeys } from '../../../src/redis/connection.js';
import { InstanceGoneError, LocalInstances, type InstanceRegistry } from '../../../src/state/instances.js';
import { RedisInstances } from '../../../src/state/redis/instances.js';
import { RedisTaskStore } from '../../../src/state/redis/tasks.js';
import { MemoryTaskStore, TaskLimitError, type TaskStore } from '../../../src/state/tasks.js';
import { overRedisForms } from '../../helpers/redis-contract.js';

const log = pino({ level: 'silent' });
const limits = { maxPerOwner: 2, maxTotal: 3 };


function task(ttl = 60_000): Task {
  const now = new Date().toISOString();
  return { taskId: randomUUID().replaceAll('-', ''), status: 'working', ttl, createdAt: now, lastUpdatedAt: now, pollInterval: 100 };
}

/** The TaskStore contract over one store kind; `open` gives a store of its own (a fresh prefix for Redis). */
function taskContract(name: string, open: () => TaskStore): void {
  describe(`TaskStore contract (${name})`, () => {
    it('keeps a record with its owner and instance; progress shows input requests; a task ends once, the first end wins', async () => {
      const store = open();
      const made = task();
      await store.create({ task: made, owner: 'key:a', instance: 'i1' }, limits);
      assert.deepEqual(await store.get(made.taskId), { task: made, owner: 'key:a', instance: 'i1' });
      const asked = { q1: { method: 'elicitation/create', params: { message: 'which?' } } };
      await store.progress(made.taskId, 'input_required', asked);
      const waiting = await store.get(made.taskId);
      assert.equal(waiting?.task.status, 'input_required');
      assert.deepEqual(waiting?.inputRequests, asked);
      await store.progress(made.taskId, 'working', undefined);
      assert.equal((await store.get(made.taskId))?.inputRequests, undefined);

      const result = { content: [{ type: 'text', text: 'done' }] };
      assert.equal(await store.finish(made.taskId, { status: 'cancelled', result: { content: [], isError: true }, statusMessage: 'Cancelled.' }), true);
      assert.equal(await store.finish(made.taskId, { status: 'completed', result }), false, 'the second end is ignored');
      await store.progress(made.taskId, 'working', undefined);
      const ended = await store.get(made.taskId);
      assert.equal(ended?.task.status, 'cancelled');
      assert.equal(ended?.task.statusMessage, 'Cancelled.');
      assert.deepEqual(ended?.result, { content: [], isError: true });

      const failing = task();
      await store.create({ task: failing, owner: 'key:a', instance: 'i1' }, { maxPerOwner: 5, maxTotal: 5 });
      await store.finish(failing.taskId, { status: 'failed', result: { content: [], isError: true }, error: { code: -32603, message: 'boom' } });
      assert.deepEqual((await store.get(failing.taskId))?.error, { code: -32603, message: 'boom' });
      assert.equal(await store.get('no-such-task'), undefined);
      await store.close();
    });

    it('bounds per owner (an ended task makes room, none ended refuses) and in total; lists an owner\'s own, oldest first', async () => {
      const store = open();
      const [a1, a2, a3, b1, c1] = [task(), task(), task(), task(), task()];
      await store.create({ task: a1, owner: 'a', instance: 'i' }, limits);
      await store.create({ task: a2, owner: 'a', instance: 'i' }, limits);
      await assert.rejects(store.create({ task: a3, owner: 'a', instance: 'i' }, limits), (error) => error instanceof TaskLimitError && /per session/.test(error.message));
      await store.finish(a1.taskId, { status: 'completed', result: { content: [] } });
      await store.create({ task: a3, owner: 'a', instance: 'i' }, limits);
      assert.equal(await store.get(a1.taskId), undefined, 'the ended task made room');
      assert.deepEqual((await store.list('a')).map((record) => record.task.taskId), [a2.taskId, a3.taskId]);
      await store.create({ task: b1, owner: 'b', instance: 'i' }, limits);
      await assert.rejects(store.create({ task: c1, owner: 'c', instance: 'i' }, limits), /holds 3 tasks/);
      assert.deepEqual((await store.list('b')).map((record) => record.task.taskId), [b1.taskId]);
      assert.deepEqual(await store.list('c'), []);
      await store.delete(b1.taskId);
      assert.equal(await store.get(b1.taskId), undefined);
      await store.create({ task: c1, owner: 'c', instance: 'i' }, limits);
      await store.close();
    });

    it('forgets a task at its ttl', async () => {
      const store = open();
      const short = task(80);
      await store.create({ task: short, owner: 'a', instance: 'i' }, limits);
      assert.ok(await store.get(short.taskId));
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(await store.get(short.taskId), undefined);
      assert.deepEqual(await store.list('a'), []);
      await store.close();
    });
  });
}

taskContract('memory', () => new MemoryTaskStore());
// The single Redis and the three-master Cluster (hash-tagged keys: an owner's scripts stay in one slot).
overRedisForms('task', (label, redis, prefix, hashTag) => taskContract(label, () => new RedisTaskStore(redis(), new RedisKeys(prefix(), { hashTag }))));

describe('instance registry', () => {
  it('without Redis: this instance only; a message to another is InstanceGoneError', async () => {
    const local = new LocalInstances();
    local.handle('echo', async (body) => body);
    assert.equal(await local.isAlive(local.id), true);
    assert.equal(await local.isAlive('someone-else'), false);
    assert.deepEqual(await local.ask(local.id, 'echo', { a: 1 }, 1_000), { a: 1 });
    await assert.rejects(local.ask('someone-else', 'echo', {}, 1_000), InstanceGoneError);
  });

});

/** The registry over a Redis form: two (then three) instances on one prefix, each with its own bus, as processes have. */
function registryContract(label: string, open: () => { bus: () => RedisBus }, close: () => Promise<void>): void {
  describe(`instance registry (${label})`, () => {
    // Heartbeats and closed marks expire by themselves: only the connections to close.
    after(close);
    it('with Redis: each instance sees the other alive, asks it and gets its answer or its error; a closed one is gone at once, and one that stops beating is gone within the TTL', async () => {
      const { bus } = open();
      const options = { log, heartbeatTtlMs: 600, heartbeatIntervalMs: 100 };
      const one: InstanceRegistry = await RedisInstances.start(bus(), options);
      const two = await RedisInstances.start(bus(), options);
      two.handle('double', async (body) => (body as number) * 2);
      two.handle('fail', async () => {
        throw new Error('no such round');
      });
      assert.notEqual(one.id, two.id);
      assert.equal(await one.isAlive(two.id), true);
      assert.equal(await one.ask(two.id, "double", 21, 5_000), 42);
      await assert.rejects(one.ask(two.id, 'fail', null, 5_000), /no such round/);
      // A question in flight when the other stops beating (a kill -9 cannot delete its key): gone, not a timeout.
      two.handle('slow', () => new Promise(() => {}));
      const asked = one.ask(two.id, 'slow', null, 30_000);
      clearInterval((two as unknown as { heartbeat: NodeJS.Timeout }).heartbeat);
      const started = Date.now();
      await assert.rejects(asked, InstanceGoneError);
      assert.ok(Date.now() - started < 5_000);
      assert.equal(await one.isAlive(two.id), false);
      await two.close();
      const three = await RedisInstances.start(bus(), options);
      assert.equal(await one.isAlive(three.id), true);
      await three.close();
      assert.equal(await one.isAlive(three.id), false, 'a closed instance is gone at once');
      await assert.rejects(one.ask(three.id, 'double', 1, 1_000), InstanceGoneError);
      await one.close();
    });
  });
}

overRedisForms('instance', (label, _redis, prefix, hashTag, settings) => {
  const buses: RedisBus[] = [];
  registryContract(
    label,
    () => {
      const keys = new RedisKeys(prefix(), { hashTag });
      return {
        bus: () => {
          const opened = new RedisBus({ redis: settings(), keys, log, connectionName: `test-instances-${buses.length}` });
          buses.push(opened);
          return opened;
        },
      };
    },
    async () => {
      for (const opened of buses.splice(0)) await opened.close();
    },
  );
});
