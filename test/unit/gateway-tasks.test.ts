import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayTasks, TaskLimitError } from '../../src/mcp/relay/tasks.js';
import { waitFor } from '../helpers/mcp.js';

const options = { maxPerOwner: 2, maxTotal: 3, defaultTtlMs: 60_000, maxTtlMs: 120_000, pollIntervalMs: 100 };
const never = (signal: AbortSignal) => new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
const done = async () => ({ content: [{ type: 'text', text: 'done' }] });

describe('GatewayTasks: the bounded, owner-bound store behind client-initiated tasks', () => {
  it('refuses a task past the per-owner bound while all are running, and makes room by dropping a finished one', async () => {
    const tasks = new GatewayTasks(options);
    try {
      await tasks.start('a', undefined, never);
      // Ends when told: start() is asynchronous, so a task ending at once could end before the next start.
      let finish!: () => void;
      const gate = new Promise<void>((resolve) => (finish = resolve));
      const finished = await tasks.start('a', undefined, async () => (await gate, done()));
      await assert.rejects(tasks.start('a', undefined, never), (error) => error instanceof TaskLimitError);
      const store = tasks.storeFor('a');
      finish();
      await waitFor('first task finished', async () => (await store.getTask(finished.taskId))?.status === 'completed');
      const third = await tasks.start('a', undefined, never);
      assert.equal(await store.getTask(finished.taskId), null, 'the finished task made room');
      assert.equal((await store.getTask(third.taskId))?.status, 'working');
      // The total bound: one more owner fits, then nobody.
      await tasks.start('b', undefined, never);
      await assert.rejects(tasks.start('c', undefined, never), /holds 3 tasks/);
    } finally {
      tasks.close();
    }
  });

  it('caps the ttl, forgets a task when its ttl runs out and aborts its work then', async () => {
    const tasks = new GatewayTasks(options);
    try {
      assert.equal((await tasks.start('a', 10_000_000, done)).ttl, 120_000);
      let aborted = false;
      const short = await tasks.start('a', 50, (signal) => {
        signal.addEventListener('abort', () => (aborted = true));
        return never(signal);
      });
      await waitFor('expired', async () => (await tasks.storeFor('a').getTask(short.taskId)) === null);
      await waitFor('work aborted', async () => aborted);
    } finally {
      tasks.close();
    }
  });

  it('an owner sees only its own tasks; a failure is kept as an error result', async () => {
    const tasks = new GatewayTasks(options);
    try {
      const failing = await tasks.start('a', undefined, async () => {
        throw new Error('upstream went away');
      });
      const other = tasks.storeFor('b');
      assert.equal(await other.getTask(failing.taskId), null);
      assert.deepEqual((await other.listTasks()).tasks, []);
      await assert.rejects(other.getTaskResult(failing.taskId), /not found/);
      const mine = tasks.storeFor('a');
      await waitFor('failed', async () => (await mine.getTask(failing.taskId))?.status === 'failed');
      const result = (await mine.getTaskResult(failing.taskId)) as { isError?: boolean; content: { text: string }[] };
      assert.equal(result.isError, true);
      assert.match(result.content[0]!.text, /upstream went away/);
    } finally {
      tasks.close();
    }
  });
});
