/**
 * The shared queue of a 2025-11-25 background task's messages (src/state/redis/task-messages.ts), on the suite's
 * single Redis and a 3-master Cluster, against the SDK's in-memory queue as the reference: first in, first out;
 * refused beyond maxSize; dequeueAll empties it; the list expires.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { QueuedMessage, TaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import { InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import { RedisKeys } from '../../../src/redis/connection.js';
import { RedisTaskMessageQueue } from '../../../src/state/redis/task-messages.js';
import { overRedisForms } from '../../helpers/redis-contract.js';

const request = (id: string | number): QueuedMessage => ({ type: 'request', message: { jsonrpc: '2.0', id, method: 'elicitation/create', params: { message: `q${id}` } }, timestamp: 1 });
const note = (text: string): QueuedMessage => ({ type: 'notification', message: { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: text } }, timestamp: 2 });

function contract(label: string, open: () => TaskMessageQueue, ttl?: (taskId: string) => Promise<number>): void {
  describe(`task message queue (${label})`, () => {
    it('delivers in order, refuses beyond maxSize, and empties on dequeueAll', async () => {
      const queue = open();
      await queue.enqueue('t1', request('a1:1'), 's', 3);
      await queue.enqueue('t1', note('one'), 's', 3);
      await queue.enqueue('t2', request(7), 's', 3);
      await queue.enqueue('t1', note('two'), 's', 3);
      await assert.rejects(queue.enqueue('t1', note('three'), 's', 3), /overflow/);
      assert.deepEqual(await queue.dequeue('t1', 's'), request('a1:1'));
      assert.deepEqual(await queue.dequeueAll('t1', 's'), [note('one'), note('two')]);
      assert.equal(await queue.dequeue('t1', 's'), undefined);
      assert.deepEqual(await queue.dequeue('t2', 'another session'), request(7), 'a task id is the queue (the task store checks the session)');
      if (ttl) {
        await queue.enqueue('t3', note('x'));
        assert.ok((await ttl('t3')) > 0, 'the queue expires');
      }
    });
  });
}

contract('SDK in-memory reference', () => new InMemoryTaskMessageQueue());
overRedisForms('task-message', (label, redis, prefix, hashTag) => {
  let keys: RedisKeys;
  contract(
    label,
    () => new RedisTaskMessageQueue(redis(), (keys = new RedisKeys(prefix(), { hashTag })), 60_000),
    (taskId) => redis().pttl(keys.taskMessages(taskId)),
  );
});
