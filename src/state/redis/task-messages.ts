/**
 * What a 2025-11-25 background task's upstream asks or logs while it runs (elicitation, sampling, log messages), queued
 * for the client's `tasks/result`, in Redis: `tasks/result` on any instance delivers it (the 1.x SDK reads this queue
 * in its tasks/result handler). One list per task (task ids are random and global; the task store decides who may
 * see a task), bounded by the SDK's maxTaskQueueSize, expiring with the longest task ttl. The answer to a delivered
 * request comes back to whichever instance the client posts it to and is passed to the instance that asked
 * (src/mcp/server/http.ts: request ids carry the asking copy's tag).
 */
import type { QueuedMessage, TaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import { withRedis, type RedisClient, type RedisKeys } from '../../redis/connection.js';

/** KEYS: the list. ARGV: message json, max size ('' for none), ttl ms. Returns 0 when full. */
const ENQUEUE = `
if ARGV[2] ~= '' and redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

export class RedisTaskMessageQueue implements TaskMessageQueue {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** How long a queue outlives its last message: the longest a task may live (mcp.tasks.maxTtlMs). */
    private readonly ttlMs: number,
  ) {}

  async enqueue(taskId: string, message: QueuedMessage, _sessionId?: string, maxSize?: number): Promise<void> {
    const key = this.keys.taskMessages(taskId);
    const added = await withRedis('queueing a task message', () => this.redis.eval(ENQUEUE, 1, key, JSON.stringify(message), maxSize === undefined ? '' : String(maxSize), String(this.ttlMs)));
    if (added === 0) throw new Error(`Task message queue overflow: the queue of task ${taskId} holds its maximum (${maxSize})`);
  }

  async dequeue(taskId: string): Promise<QueuedMessage | undefined> {
    const text = await withRedis('reading a task message', () => this.redis.lpop(this.keys.taskMessages(taskId)));
    return text === null ? undefined : (JSON.parse(text) as QueuedMessage);
  }

  async dequeueAll(taskId: string): Promise<QueuedMessage[]> {
    const key = this.keys.taskMessages(taskId);
    const rows = await withRedis('reading a task\'s messages', () => this.redis.multi().lrange(key, 0, -1).del(key).exec());
    const [error, texts] = rows?.[0] ?? [null, []];
    if (error) throw error;
    return (texts as string[]).map((text) => JSON.parse(text) as QueuedMessage);
  }
}
