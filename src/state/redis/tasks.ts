/**
 * Tasks' records in Redis (the contract is TaskStore's, src/state/tasks.ts). A task is a hash that expires with the
 * task (`status`, `task`, `owner`, `instance`, and once written `result`, `error`, `inputs`); the owner's ids sit in a
 * sorted set by creation time, every id in one by expiry (the total bound). Creating, progressing and finishing are
 * Lua scripts, so the bounds hold across instances and a task ends exactly once (the first finish wins). On a cluster
 * every key carries the deployment's hash tag (RedisKeys), so a script touching an owner's other tasks stays in one slot.
 * A command Redis refuses or does not answer (down, restarting, out of memory) is a RedisUnavailableError, never
 * Redis's own text: the MCP faces answer it as a retryable error (src/mcp/server/unavailable.ts).
 */
import { createHash } from 'node:crypto';
import type { Result, Task } from '@modelcontextprotocol/sdk/types.js';
import { withRedis, type RedisClient, type RedisKeys } from '../../redis/connection.js';
import { TaskLimitError, tooManyMessage, type InputRequests, type TaskEnd, type TaskLimits, type TaskRecord, type TaskStore } from '../tasks.js';

const ENDED = `local function ended(s) return s == 'completed' or s == 'failed' or s == 'cancelled' end`;

/** KEYS: record, owner set, all set. ARGV: id, task json, owner, instance, ttl, now, maxPerOwner, maxTotal, record key prefix. */
const CREATE = `${ENDED}
local now = tonumber(ARGV[6]); local ttl = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local live = 0; local oldest = nil
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local s = redis.call('HGET', ARGV[9] .. id, 'status')
  if not s then redis.call('ZREM', KEYS[2], id)
  else
    live = live + 1
    if not oldest and ended(s) then oldest = id end
  end
end
if live >= tonumber(ARGV[7]) then
  if not oldest then return 'owner' end
  redis.call('DEL', ARGV[9] .. oldest); redis.call('ZREM', KEYS[2], oldest); redis.call('ZREM', KEYS[3], oldest)
end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[8]) then return 'total' end
redis.call('HSET', KEYS[1], 'status', 'working', 'task', ARGV[2], 'owner', ARGV[3], 'instance', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ttl)
-- Listed in creation order even when two tasks of an owner come in the same millisecond (or from instances whose
-- clocks differ): a score never below the owner's newest. Equal scores would order by id, i.e. at random.
local order = now
local newest = redis.call('ZREVRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) >= order then order = tonumber(newest[2]) + 0.01 end
redis.call('ZADD', KEYS[2], order, ARGV[1]); redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end end
return 'ok'`;

/** KEYS: record. ARGV: status, now (ISO), inputs json or ''. */
const PROGRESS = `${ENDED}
local s = redis.call('HGET', KEYS[1], 'status')
if not s or ended(s) then return 0 end
local task = cjson.decode(redis.call('HGET', KEYS[1], 'task'))
task.status = ARGV[1]; task.lastUpdatedAt = ARGV[2]
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'task', cjson.encode(task))
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'inputs', ARGV[3]) else redis.call('HDEL', KEYS[1], 'inputs') end
return 1`;

/** KEYS: record. ARGV: status, now (ISO), result json, error json or '', statusMessage or '' (with ARGV[6] = '1' when set). */
const FINISH = `${ENDED}
local s = redis.call('HGET', KEYS[1], 'status')
if not s or ended(s) then return 0 end
local task = cjson.decode(redis.call('HGET', KEYS[1], 'task'))
task.status = ARGV[1]; task.lastUpdatedAt = ARGV[2]
if ARGV[6] == '1' then task.statusMessage = ARGV[5] end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'task', cjson.encode(task), 'result', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'error', ARGV[4]) end
redis.call('HDEL', KEYS[1], 'inputs')
return 1`;

/** Owner names may be subjects (emails, URLs): hashed into the key. */
function ownerHash(owner: string): string {
  return createHash('sha256').update(owner).digest('hex').slice(0, 32);
}

export class RedisTaskStore implements TaskStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  async create(record: TaskRecord, limits: TaskLimits): Promise<void> {
    const { task } = record;
    const outcome = await withRedis('creating the task', () => this.redis.eval(
      CREATE,
      3,
      this.keys.task(task.taskId),
      this.keys.taskOwner(ownerHash(record.owner)),
      this.keys.tasksAll,
      task.taskId,
      JSON.stringify(task),
      record.owner,
      record.instance,
      String(task.ttl),
      String(Date.now()),
      String(limits.maxPerOwner),
      String(limits.maxTotal),
      this.keys.task(''),
    ));
    if (outcome === 'owner' || outcome === 'total') throw new TaskLimitError(tooManyMessage(outcome, limits));
  }

  async get(taskId: string): Promise<TaskRecord | undefined> {
    const fields = await withRedis('reading the task', () => this.redis.hgetall(this.keys.task(taskId)));
    return fields.task === undefined ? undefined : recordOf(fields);
  }

  async progress(taskId: string, status: 'working' | 'input_required', inputRequests: InputRequests | undefined): Promise<void> {
    const inputs = status === 'input_required' && inputRequests ? JSON.stringify(inputRequests) : '';
    await withRedis('writing the task\'s status', () => this.redis.eval(PROGRESS, 1, this.keys.task(taskId), status, new Date().toISOString(), inputs));
  }

  async finish(taskId: string, end: TaskEnd): Promise<boolean> {
    const ended = await withRedis('writing the task\'s end', () => this.redis.eval(
      FINISH,
      1,
      this.keys.task(taskId),
      end.status,
      new Date().toISOString(),
      JSON.stringify(end.result),
      end.error ? JSON.stringify(end.error) : '',
      end.statusMessage ?? '',
      end.statusMessage === undefined ? '0' : '1',
    ));
    return ended === 1;
  }

  async list(owner: string): Promise<TaskRecord[]> {
    return withRedis('listing the tasks', () => this.listed(owner));
  }

  private async listed(owner: string): Promise<TaskRecord[]> {
    const ids = await this.redis.zrange(this.keys.taskOwner(ownerHash(owner)), '0', '-1');
    if (ids.length === 0) return [];
    // Only what a listing needs: results stay in Redis.
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hmget(this.keys.task(id), 'task', 'owner', 'instance');
    const rows = (await pipeline.exec()) ?? [];
    const records: TaskRecord[] = [];
    for (const [error, value] of rows) {
      const [task, taskOwner, instance] = (error ? [] : value) as (string | null)[];
      // An owner set is per hashed owner: the stored owner decides (a hash collision never shows another's task).
      if (task && taskOwner === owner && instance) records.push({ task: JSON.parse(task) as Task, owner: taskOwner, instance });
    }
    return records;
  }

  async delete(taskId: string): Promise<void> {
    await withRedis('deleting the task', () => this.deleted(taskId));
  }

  private async deleted(taskId: string): Promise<void> {
    const owner = await this.redis.hget(this.keys.task(taskId), 'owner');
    const multi = this.redis.multi().del(this.keys.task(taskId)).zrem(this.keys.tasksAll, taskId);
    if (owner !== null) multi.zrem(this.keys.taskOwner(ownerHash(owner)), taskId);
    await multi.exec();
  }

  async close(): Promise<void> {}
}

function recordOf(fields: Record<string, string>): TaskRecord {
  return {
    task: JSON.parse(fields.task!) as Task,
    owner: fields.owner ?? '',
    instance: fields.instance ?? '',
    ...(fields.result === undefined ? {} : { result: JSON.parse(fields.result) as Result }),
    ...(fields.error === undefined ? {} : { error: JSON.parse(fields.error) as { code: number; message: string } }),
    ...(fields.inputs === undefined ? {} : { inputRequests: JSON.parse(fields.inputs) as InputRequests }),
  };
}
