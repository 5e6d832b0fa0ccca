import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { ADMIN_KEY, call } from '../helpers/keys.js';
import { stdioFixtureServer } from '../helpers/mcp.js';
import { PrivateRedis } from '../helpers/redis-server.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/**
 * Issue 56: Redis refusing writes (maxmemory reached, noeviction) on a test-owned Redis. A 2025 `initialize` gets a
 * retryable JSON-RPC error (HTTP 503, -32000, Retry-After), not HTTP 400 "Parse error"; no answer carries Redis's own
 * error text (OOM …); once Redis takes writes again, initialize works.
 */
describe('Redis out of memory: retryable errors without Redis text', () => {
  const redis = new PrivateRedis();
  let api: RunningRouter;
  let admin: Redis;

  const initialize = () =>
    call(api.url, 'POST', '/mcp', {
      key: ADMIN_KEY,
      headers: { accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'oom', version: '1.0.0' } } },
    });

  before(async () => {
    await redis.start();
    admin = new Redis(redis.url);
    api = await startRouter({ adminKey: ADMIN_KEY, redisUrl: redis.url, queue: { prefix: 'oom-errors', backoffMs: 100 }, mcp: { servers: { files: stdioFixtureServer() }, pingIntervalMs: 0 } });
  });
  after(async () => {
    await api?.close();
    admin?.disconnect();
    await redis.stop();
  });

  it('answers initialize and writes with retryable errors naming no Redis error, and recovers', async () => {
    const fine = await initialize();
    assert.equal(fine.status, 200, JSON.stringify(fine.body));
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      const refused = await initialize();
      assert.equal(refused.status, 503, JSON.stringify(refused.body));
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      assert.equal(refused.body.error.code, -32000);
      assert.equal(refused.body.id, 1);
      assert.doesNotMatch(JSON.stringify(refused.body), /OOM|maxmemory|Parse error|RedisUnavailableError/);
      const put = await call(api.url, 'PUT', '/v1/catalog/sources/oom', { key: ADMIN_KEY, body: { tools: syntheticTools(2, 'oom') } });
      assert.equal(put.status, 503, JSON.stringify(put.body));
      assert.equal(put.body.error.code, 'redis_unavailable');
      assert.doesNotMatch(JSON.stringify(put.body), /OOM|maxmemory/);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    const again = await initialize();
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.ok(again.headers.get('mcp-session-id'));
  });
});
