import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReplyError } from 'ioredis';
import { isRedisErrorText, RedisUnavailableError } from '../../src/redis/connection.js';
import { withBareError } from '../../src/mcp/server/rpc-error.js';

/** Issue 56: Redis's own error text never reaches an MCP client; it goes out as a retryable server error. */
describe('Redis error text on the MCP wire', () => {
  it('recognises Redis replies and ioredis connection failures, not toolrouter or tool messages', () => {
    assert.ok(isRedisErrorText(new ReplyError("OOM command not allowed when used memory > 'maxmemory'.")));
    assert.ok(isRedisErrorText(new Error('Connection is closed.')));
    assert.ok(isRedisErrorText("OOM command not allowed when used memory > 'maxmemory'."));
    assert.ok(isRedisErrorText(new RedisUnavailableError('reading the task', new Error('Connection is closed.'))));
    assert.ok(!isRedisErrorText(new Error('unknown tool: files__nope')));
    assert.ok(!isRedisErrorText('Failed to retrieve task: Task not found'));
  });

  it('replaces such an error with -32000 and data.retryable, and leaves others as they were (bare)', () => {
    const oom = withBareError<{ id: number; error: { code: number; message: string; data?: unknown } }>({ id: 7, error: { code: -32603, message: "OOM command not allowed when used memory > 'maxmemory'." } });
    assert.equal(oom.id, 7);
    assert.equal(oom.error.code, -32000);
    assert.deepEqual(oom.error.data, { code: 'redis_unavailable', retryable: true });
    assert.doesNotMatch(oom.error.message, /OOM|maxmemory/);
    assert.match(oom.error.message, /retry/);
    const other = withBareError({ jsonrpc: '2.0', id: 8, error: { code: -32602, message: 'MCP error -32602: unknown tool' } });
    assert.deepEqual(other.error, { code: -32602, message: 'unknown tool' });
  });
});
