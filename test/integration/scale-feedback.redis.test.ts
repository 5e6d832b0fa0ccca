import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { ADMIN_KEY, generateKey } from '../helpers/keys.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { dropPrefixKeys, eventually, REDIS_URL, WorkerProcess, writeConfig } from '../helpers/processes.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/**
 * Issue 47: usage learning when a search and the call that follows it reach different instances. Two API instances
 * and a worker on one Redis prefix; a v2 SDK client on the stateless 2026-07-28 revision searches on instance A and
 * calls on instance B, with the search id (call_tool's `search_id`) and without it (the key's recent searches). Each
 * pairing is credited once, wherever the call lands.
 */
describe('feedback across instances (MCP 2026-07-28, stateless)', () => {
  const prefix = `trscalefb-${randomUUID().slice(0, 8)}`;
  const settings = {
    adminKey: ADMIN_KEY,
    redis: { url: REDIS_URL },
    queue: { prefix, attempts: 3, backoffMs: 100 },
    mcp: { search: true, servers: { files: stdioFixtureServer() }, pingIntervalMs: 0 },
  };
  let worker: WorkerProcess;
  let a: RunningRouter;
  let b: RunningRouter;
  let onA: ClientV2;
  let onB: ClientV2;

  const connect = async (url: string, key: string) => {
    const client = new ClientV2({ name: 'scale-feedback', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new HttpTransportV2(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    return client;
  };
  /** Feedback events as instance B holds them (each instance loads every event from Redis and hears each append). */
  const events = () => b.router.feedback!.size;
  const search = async (client: ClientV2, query: string) => {
    const result = await client.callTool({ name: 'search_tools', arguments: { query, top_k: 1 } });
    return result.structuredContent as { tools: { name: string }[]; search_id?: string };
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
    await dropPrefixKeys(prefix);
  });

  it('credits a call on B to the search made on A, by its search id, once', async () => {
    const found = await search(onA, 'add two numbers together');
    assert.deepEqual(found.tools.map((tool) => tool.name), ['files__add']);
    assert.ok(found.search_id, 'a prose search with hits gets an id');
    const before = events();
    const result = await onB.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 2, b: 3 }, search_id: found.search_id } });
    assert.equal(textOf(result), '5');
    await eventually(events, (size) => size === before + 1, 20_000);
    // The same search and tool again, on either instance: not new evidence.
    await onA.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 1 }, search_id: found.search_id } });
    await onB.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 1, b: 2 }, search_id: found.search_id } });
    // A later credited pairing proves the two calls above had their chance.
    const next = await search(onB, 'echo this text back to me');
    assert.deepEqual(next.tools.map((tool) => tool.name), ['files__echo']);
    await onA.callTool({ name: 'call_tool', arguments: { name: 'files__echo', arguments: { text: 'hi' }, search_id: next.search_id } });
    await eventually(events, (size) => size >= before + 2, 20_000);
    assert.equal(events(), before + 2);
  });

  it("credits a call on B without a search id through the key's recent searches made on A", async () => {
    const found = await search(onA, 'wait some milliseconds before answering');
    assert.deepEqual(found.tools.map((tool) => tool.name), ['files__slow']);
    const before = events();
    await onB.callTool({ name: 'files__slow', arguments: { ms: 1 } });
    await eventually(events, (size) => size === before + 1, 20_000);
  });
});
