import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { PrivateRedis } from '../helpers/redis-server.js';
import { eventually, WorkerProcess, writeConfig } from '../helpers/processes.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/** Issue 21, cases 3, 4, 7, 9 and 11, against a private redis-server, real BullMQ worker processes and API instances. */

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

/** Bytes Redis uses for this prefix's keys (MEMORY USAGE summed over SCAN), and the keys by family. */
async function prefixUsage(redis: Redis, prefix: string): Promise<{ bytes: number; snapshots: number; artifacts: number }> {
  let cursor = '0';
  let bytes = 0;
  let snapshots = 0;
  let artifacts = 0;
  let rounds = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      bytes += (await redis.memory('USAGE', key)) ?? 0;
      const rest = key.slice(prefix.length + 1);
      if (/^catalog:[0-9a-f]{64}$/.test(rest)) snapshots++;
      if (/^index:[^:]+:[0-9a-f]{64}$/.test(rest)) artifacts++;
    }
  } while (cursor !== '0' && ++rounds < 10_000);
  return { bytes, snapshots, artifacts };
}

describe('Redis outage: authenticated requests fail fast (cases 3 and 9)', () => {
  const redis = new PrivateRedis();
  let api: RunningRouter;
  let key: string;

  before(async () => {
    await redis.start();
    api = await startRouter({
      adminKey: ADMIN_KEY,
      redisUrl: redis.url,
      queue: { prefix: 'rel-outage' },
      security: { authFailuresPerIpPerMinute: 5, perIpPerMinute: 10_000, redisTimeoutMs: 500 },
    });
    key = (await generateKey(api.url, { allowed_servers: ['docs'] })).key;
    // The key is seen once while Redis is up (its record is then known to this instance).
    assert.equal((await call(api.url, 'GET', '/v1/index/status', { key })).status, 200);
  });

  after(async () => {
    await api?.close();
    await redis.stop();
  });

  it('answers the admin, a known key and an unknown key within the command timeout while Redis is down', async () => {
    await redis.stop();
    try {
      await measureDuringOutage();
    } finally {
      await redis.start();
    }
  });

  async function measureDuringOutage(): Promise<void> {
    const slowest: Record<string, number> = {};
    for (let round = 0; round < 5; round++) {
      const admin = await timed(() => call(api.url, 'GET', '/v1/index/status', { key: ADMIN_KEY }));
      assert.equal(admin.value.status, 200);
      const known = await timed(() => call(api.url, 'GET', '/v1/index/status', { key }));
      assert.equal(known.value.status, 200);
      const unknown = await timed(() => call(api.url, 'GET', '/v1/index/status', { key: 'sk-tr-never-issued-0000000000000000' }));
      assert.equal(unknown.value.status, 503);
      assert.equal(unknown.value.body.error.code, 'redis_unavailable');
      for (const [name, ms] of Object.entries({ admin: admin.ms, known: known.ms, unknown: unknown.ms })) slowest[name] = Math.max(slowest[name] ?? 0, ms);
    }
    // The command timeout is 500 ms; ioredis's retries alone took about 14 s per request before.
    process.stdout.write(`# slowest while Redis is down: ${JSON.stringify(Object.fromEntries(Object.entries(slowest).map(([name, ms]) => [name, Math.round(ms)])))}\n`);
    for (const [name, ms] of Object.entries(slowest)) assert.ok(ms < 1_000, `${name} request took ${ms.toFixed(0)} ms`);
  }

  it('never locks the admin key out after failed logins from its address', async () => {
    // Reconnected (the admin itself never needed Redis): failed logins are counted in Redis again.
    await eventually(() => call(api.url, 'GET', '/ready'), (reply) => reply.body.checks?.redis?.ok === true, 20_000);
    for (let attempt = 0; attempt < 8; attempt++) await call(api.url, 'GET', '/v1/index/status', { key: `sk-tr-bad-${attempt}` });
    assert.equal((await call(api.url, 'GET', '/v1/index/status', { key: 'sk-tr-bad-more' })).status, 429);
    assert.equal((await call(api.url, 'GET', '/v1/index/status', { key: ADMIN_KEY })).status, 200);
    assert.equal((await call(api.url, 'GET', '/key/list', { key: ADMIN_KEY })).status, 200);
  });
});

describe('Redis retention after 200 catalog changes (case 7)', () => {
  const prefix = `rel-retention-${process.pid}`;
  const redis = new PrivateRedis();
  const settings = () => ({ redisUrl: redis.url, queue: { prefix, backoffMs: 100 } });
  let api: RunningRouter;
  let worker: WorkerProcess;
  let client: Redis;

  before(async () => {
    await redis.start();
    client = new Redis(settings().redisUrl);
    worker = new WorkerProcess(writeConfig(settings()));
    await worker.ready();
    api = await startRouter(settings());
  });

  after(async () => {
    client?.disconnect();
    await api?.close();
    await worker?.kill('SIGKILL');
    await redis.stop();
  });

  it('keeps at most the configured snapshots and indexes, within bytes of a few copies of the catalog', async () => {
    const tools = syntheticTools(200, 'ret');
    for (let change = 0; change < 200; change++) {
      tools[0] = { ...tools[0]!, description: `changed ${change} times` };
      const put = await api.request('PUT', '/v1/catalog/sources/ret', { tools });
      assert.equal(put.status, 200);
      // Let some builds finish along the way, as a real sequence of changes would.
      if (change % 40 === 39) await api.indexed();
    }
    await api.indexed();
    const usage = await prefixUsage(client, prefix);
    const snapshotBytes = Buffer.byteLength((await client.get(`${prefix}:catalog:${api.router.indexes.current!.catalogHash}`))!);
    const artifactBytes = (await client.strlen(`${prefix}:index:${api.router.indexes.current!.model}:${api.router.indexes.current!.catalogHash}`));
    // Defaults: 3 snapshots, 2 indexes (current and previous); the embedding cache holds one vector per distinct text.
    assert.ok(usage.snapshots <= 3, `snapshots kept: ${usage.snapshots}`);
    // Current and previous, plus at most one just built for a catalog already overtaken (deleted right after).
    assert.ok(usage.artifacts <= 3, `indexes kept: ${usage.artifacts} (${(await client.keys(`${prefix}:index:*`)).join(', ')})`);
    const bound = 3 * snapshotBytes * 2 + 2 * artifactBytes * 2 + 1024 * 1024;
    assert.ok(usage.bytes < bound, `Redis holds ${usage.bytes} bytes for the prefix, bound ${bound}`);
    process.stdout.write(`# retention: ${usage.bytes} bytes after 200 changes (snapshot ${snapshotBytes} B, index ${artifactBytes} B, ${usage.snapshots} snapshots, ${usage.artifacts} indexes)\n`);
  });
});

describe('a worker killed mid-build (case 11)', () => {
  const prefix = `rel-stalled-${process.pid}`;
  const redis = new PrivateRedis();
  const settings = () => ({ redisUrl: redis.url, queue: { prefix, backoffMs: 100, lockDurationMs: 4_000, stalledIntervalMs: 1_000 } });
  let api: RunningRouter;
  const workers: WorkerProcess[] = [];

  before(async () => {
    await redis.start();
    api = await startRouter(settings());
  });

  after(async () => {
    await api?.close();
    for (const worker of workers) await worker.kill('SIGKILL');
    await redis.stop();
  });

  it('status says the job waits on a dead worker\'s lock and when it is retried; another worker then builds it', async () => {
    const first = new WorkerProcess(writeConfig(settings()));
    workers.push(first);
    await first.ready();
    await api.request('PUT', '/v1/catalog/sources/big', { tools: syntheticTools(6_000, 'big') });
    await first.waitFor((line) => line.msg === 'index build started');
    await first.kill('SIGKILL');
    // Killed mid-build: the job is still active under the dead worker's lock (status says when it is retried), or the
    // stalled-job check has already put it back in the queue, where no worker is left to take it.
    const status = await eventually(
      () => api.request('GET', '/v1/index/status'),
      (reply) => /stopped renewing its lock|no index worker is connected/.test(reply.body.waiting?.reason ?? ''),
      15_000,
    );
    assert.equal(status.body.state, 'building');
    assert.equal(status.body.waiting.job, api.router.catalog.snapshot().catalogHash);
    if (/lock/.test(status.body.waiting.reason)) assert.ok(Date.parse(status.body.waiting.retryAt) > Date.now() - 5_000);

    const second = new WorkerProcess(writeConfig(settings()));
    workers.push(second);
    await eventually(() => api.request('GET', '/v1/index/status'), (reply) => reply.body.state === 'ready' && reply.body.tools === 6_000, 120_000);
  });
});

describe('Redis restarted empty (case 4)', () => {
  const prefix = `rel-converge-${process.pid}`;
  const redis = new PrivateRedis();
  const settings = () => ({ redisUrl: redis.url, queue: { prefix, backoffMs: 100, generationCheckMs: 500 }, ready: { indexGraceMs: 2_000 } });
  let a: RunningRouter;
  let b: RunningRouter;
  let worker: WorkerProcess;

  before(async () => {
    await redis.start();
    worker = new WorkerProcess(writeConfig(settings()));
    await worker.ready();
    a = await startRouter(settings());
    b = await startRouter(settings());
    assert.equal((await a.request('PUT', '/v1/catalog/sources/many', { tools: syntheticTools(300, 'many') })).status, 200);
    await eventually(() => b.request('GET', '/v1/index/status'), (reply) => reply.body.state === 'ready' && reply.body.tools === 300);
  });

  after(async () => {
    await a?.close();
    await b?.close();
    await worker?.kill('SIGKILL');
    await redis.stop();
  });

  it('two instances end on one catalog and one index built for it; /ready reports a stale index meanwhile', async () => {
    await redis.stop();
    await redis.start();
    // One instance restarts onto the empty Redis and takes a write there, as in the fault run.
    await b.close();
    b = await startRouter(settings());
    const started = Date.now();
    const put = await eventually(() => b.request('PUT', '/v1/catalog/sources/late', { tools: syntheticTools(1, 'late') }), (reply) => reply.status === 200, 20_000);
    assert.equal(put.status, 200);

    const converged = async () => {
      const [sa, sb] = await Promise.all([a.request('GET', '/v1/index/status'), b.request('GET', '/v1/index/status')]);
      return { a: sa.body, b: sb.body };
    };
    const final = await eventually(
      converged,
      ({ a: sa, b: sb }) => sa.state === 'ready' && sb.state === 'ready' && sa.catalogHash === sb.catalogHash && sa.indexedHash === sb.catalogHash,
      60_000,
    );
    const convergedMs = Date.now() - started;
    assert.equal(final.a.tools, 301);
    assert.equal(final.b.tools, 301);
    const query = { query: 'late0', top_k: 3 };
    const [ra, rb] = await Promise.all([a.post('/v1/tools/search', query), b.post('/v1/tools/search', query)]);
    assert.deepEqual(ra.body.results.map((hit: { name: string }) => hit.name), rb.body.results.map((hit: { name: string }) => hit.name));
    assert.equal((await a.request('GET', '/ready')).status, 200);
    assert.equal((await b.request('GET', '/ready')).status, 200);
    process.stdout.write(`# converged ${convergedMs} ms after the write on the restarted instance\n`);
  });

  it('/ready is 503 once the index has lagged the catalog past the grace period', async () => {
    await worker.kill('SIGKILL');
    assert.equal((await a.request('PUT', '/v1/catalog/sources/stuck', { tools: syntheticTools(2, 'stuck') })).status, 200);
    assert.equal((await a.request('GET', '/ready')).status, 200);
    const stale = await eventually(() => a.request('GET', '/ready'), (reply) => reply.status === 503, 10_000);
    assert.deepEqual(stale.body.failing, ['indexCurrent']);
    assert.match(stale.body.checks.indexCurrent.detail, /not the current catalog/);
    assert.equal((await a.post('/v1/tools/search', { query: 'many1' })).status, 200);
  });
});
