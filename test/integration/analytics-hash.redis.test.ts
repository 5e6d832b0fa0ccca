import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { Redis } from 'ioredis';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { eventually, REDIS_URL, WorkerProcess, writeConfig } from '../helpers/processes.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/**
 * Issue 56: `analytics.queries: hash` keeps no query text anywhere in Redis, the search ids' records included. Two
 * instances on one prefix; searches on A (MCP with ids, REST), calls on B credited by id; then every key under the
 * deployment's prefix is read back whole and searched for the query words.
 */
describe('analytics.queries: hash stores no query text in Redis', () => {
  const prefix = `trhashq-${randomUUID().slice(0, 8)}`;
  const settings = {
    adminKey: ADMIN_KEY,
    redis: { url: REDIS_URL },
    queue: { prefix, attempts: 3, backoffMs: 100 },
    analytics: { queries: 'hash' },
    mcp: { search: true, servers: { files: stdioFixtureServer() }, pingIntervalMs: 0 },
  };
  const words = ['zanzibarish', 'quokkaphile', 'snorkelwick'];
  let worker: WorkerProcess;
  let a: RunningRouter;
  let b: RunningRouter;
  let onA: ClientV2;
  let onB: ClientV2;
  const redis = new Redis(REDIS_URL);

  const connect = async (url: string, key: string) => {
    const client = new ClientV2({ name: 'hash-queries', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new HttpTransportV2(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    return client;
  };

  before(async () => {
    worker = new WorkerProcess(writeConfig({ ...settings, logLevel: 'info' }));
    await worker.ready();
    a = await startRouter(settings);
    b = await startRouter(settings);
    for (const api of [a, b]) {
      await api.router.mcp.upstreams.settled();
      await waitFor('files connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 60_000);
      await api.indexed();
    }
    const { key } = await generateKey(a.url, {});
    onA = await connect(a.url, key);
    onB = await connect(b.url, key);
  });

  after(async () => {
    await onA?.close().catch(() => {});
    await onB?.close().catch(() => {});
    await a?.close();
    await b?.close();
    await worker?.kill('SIGKILL');
    const keys = [...(await redis.keys(`${prefix}*`)), ...(await redis.keys(`bull:${prefix}-index:*`))];
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  /** Every key of the deployment with its whole content, as text. */
  async function dump(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const key of [...(await redis.keys(`${prefix}*`)), ...(await redis.keys(`bull:${prefix}*`))]) {
      const type = await redis.type(key);
      let content: unknown;
      if (type === 'string') content = await redis.getBuffer(key).then((value) => value?.toString('latin1'));
      else if (type === 'hash') content = await redis.hgetall(key);
      else if (type === 'list') content = await redis.lrange(key, 0, -1);
      else if (type === 'set') content = await redis.smembers(key);
      else if (type === 'zset') content = await redis.zrange(key, '0', '-1');
      else if (type === 'stream') content = await redis.xrange(key, '-', '+');
      else content = type;
      out.set(key, `${key} ${JSON.stringify(content)}`);
    }
    return out;
  }

  it('keeps search ids, histories and the log hashed, and still credits a call on another instance', async () => {
    const query = `add two numbers together ${words[0]}`;
    const found = (await onA.callTool({ name: 'search_tools', arguments: { query, top_k: 1 } })).structuredContent as { tools: { name: string }[]; search_id?: string };
    assert.deepEqual(found.tools.map((tool) => tool.name), ['files__add']);
    assert.ok(found.search_id, 'a prose search with hits still gets an id in hash mode');
    const record = await redis.hgetall(`${prefix}:searches:id:${found.search_id}`);
    assert.match(record.q ?? '', /^sha256:[0-9a-f]{64}$/, 'the search id keeps the hash');
    const result = await onB.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 2, b: 3 }, search_id: found.search_id } });
    assert.equal(textOf(result), '5');
    // A search without an id pairing (the key's history), and a REST search.
    await onA.callTool({ name: 'search_tools', arguments: { query: `echo this text back ${words[1]}`, top_k: 1 } });
    await onB.callTool({ name: 'call_tool', arguments: { name: 'files__echo', arguments: { text: 'hi' } } });
    const rest = await call(a.url, 'POST', '/v1/tools/search', { key: ADMIN_KEY, body: { query: `print the environment ${words[1]}` } });
    assert.equal(rest.status, 200, JSON.stringify(rest.body));
    // Explicit feedback: learnt from (its embedding is of the text), stored with the query's hash only.
    const told = await call(a.url, 'POST', '/v1/feedback', { key: ADMIN_KEY, body: { query: `sum two values ${words[2]}`, tool: 'files__add' } });
    assert.equal(told.status, 201, JSON.stringify(told.body));
    assert.ok(!JSON.stringify(told.body).includes(words[2]!), JSON.stringify(told.body));
    // The log pairs the call on B with the search on A though only the hash was kept.
    await eventually(
      async () => (await call(a.url, 'GET', '/v1/analytics/searches?surface=mcp', { key: ADMIN_KEY })).body.searches as { query: string; called?: string }[],
      (searches) => searches.some((search) => search.called === 'files__add') && searches.some((search) => search.called === 'files__echo'),
      20_000,
    );
    const logged = (await call(a.url, 'GET', '/v1/analytics/searches', { key: ADMIN_KEY })).body.searches as { query: string }[];
    assert.ok(logged.length >= 3);
    assert.ok(logged.every((search) => /^sha256:[0-9a-f]{64}$/.test(search.query)));
    await a.router.analytics?.flush();
    await b.router.analytics?.flush();
    const keys = await dump();
    assert.ok([...keys.keys()].some((key) => key.startsWith(`${prefix}:searches:id:`)), 'the search records are there to be read');
    assert.ok([...keys.values()].some((content) => content.includes('files__add') && content.includes('sha256:') && content.includes('feedback')), 'the feedback event is stored, hashed');
    for (const [key, content] of keys) {
      for (const word of [...words, 'add two numbers', 'echo this text', 'print the environment']) assert.ok(!content.includes(word), `${key} holds "${word}"`);
    }
  });
});
