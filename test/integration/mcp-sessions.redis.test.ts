/**
 * 2025-era /mcp sessions served by any instance (issue 47, item 6): three API instances (real processes) on one Redis,
 * behind a real HAProxy doing round robin without stickiness. A 1.x SDK client on 2025-11-25 connects through it (its
 * `initialized` notification lands on another instance than its initialize), lists, calls, answers an elicitation
 * asked on one instance with a POST that lands on another, gets tools/list_changed on its GET stream after a change
 * made on another instance, and goes on when an instance it used is killed. DELETE on one instance ends the session on
 * the others (their GET streams close); another key is refused on any instance; a session outlives the graceful stop
 * of the instance that opened it.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/http-server.js';
import { startRelayHttp, type RelayHttp } from '../fixtures/mcp/relay-server.js';
import { startRoundRobin, type Balancer } from '../helpers/balancer.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { CliProcess } from '../helpers/ops-processes.js';
import { dropPrefixKeys, eventually, REDIS_URL, writeConfig } from '../helpers/processes.js';

type Instance = { process: CliProcess; url: string };

/** Every process started, so `after` ends them all even when start-up failed half-way. */
const started: CliProcess[] = [];

/** `toolrouter serve`, given the time a loaded machine takes to start three at once. */
async function serve(configFile: string): Promise<Instance> {
  const child = new CliProcess(['--config', configFile, 'serve']);
  started.push(child);
  const line = await child.waitFor((l) => l.msg === 'toolrouter listening', 240_000);
  return { process: child, url: `http://127.0.0.1:${String(line.port)}` };
}

const textOf = (result: unknown) => ((result as { content: { text: string }[] }).content[0]?.text ?? '');

/** One JSON-RPC message over /mcp by hand: the status, the session id header, and the answer (JSON or SSE). */
async function rpc(base: string, key: string, body: unknown, session?: string): Promise<{ status: number; session: string | null; body: any }> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
  if (session !== undefined) headers['mcp-session-id'] = session;
  const response = await fetch(`${base}/mcp`, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await response.text();
  const data = text.split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice(6));
  const parsed = data.length > 0 ? JSON.parse(data.at(-1)!) : text === '' ? undefined : JSON.parse(text);
  return { status: response.status, session: response.headers.get('mcp-session-id'), body: parsed };
}

/** initialize on `base` and initialized on `then`: a session two instances have served. */
async function openSession(base: string, then: string, key: string): Promise<string> {
  const init = await rpc(base, key, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { elicitation: {} }, clientInfo: { name: 'by-hand', version: '1' } } });
  assert.equal(init.status, 200, JSON.stringify(init.body));
  assert.equal(init.body.result.protocolVersion, '2025-11-25');
  const session = init.session!;
  assert.equal((await rpc(then, key, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status, 202);
  return session;
}

const listed = async (base: string, key: string, session: string) => rpc(base, key, { jsonrpc: '2.0', id: randomUUID(), method: 'tools/list' }, session);

describe('2025-era MCP sessions on any instance (Redis, round-robin HAProxy)', { timeout: 900_000 }, () => {
  const prefix = `tr-sessions-${process.pid}-${randomUUID().slice(0, 6)}`;
  let relay: RelayHttp;
  let tracker: HttpFixture;
  let config: string;
  let instances: Instance[] = [];
  let balancer: Balancer;
  let keyA: string;
  let keyB: string;

  before(async () => {
    relay = await startRelayHttp();
    tracker = await startHttpFixture();
    config = writeConfig({
      redisUrl: REDIS_URL,
      port: 0,
      host: '127.0.0.1',
      adminKey: ADMIN_KEY,
      // HAProxy's health check sends no Host header; behind a balancer the operator accepts any (docs/scaling.md).
      security: { allowedHosts: ['*'] },
      queue: { prefix, generationCheckMs: 300 },
      mcp: { search: false, callTimeoutMs: 30_000, servers: { relay: { url: relay.url } } },
    });
    instances = await Promise.all([serve(config), serve(config), serve(config)]);
    // Checks every 3 s: HAProxy's check timeout is its interval, and a loaded test machine answers slowly.
    balancer = await startRoundRobin(
      instances.map((instance) => ({ host: '127.0.0.1', port: Number(new URL(instance.url).port) })),
      { checkIntervalMs: 3_000 },
    );
    keyA = (await generateKey(instances[0]!.url, {})).key;
    keyB = (await generateKey(instances[0]!.url, {})).key;
    // HAProxy takes a backend in once its health check passed: wait until three requests in a row get through.
    let through = 0;
    await eventually(
      async () => (through = (await fetch(`${balancer.url}/health`).then((response) => response.ok, () => false)) ? through + 1 : 0),
      (count) => count >= 3,
      120_000,
    );
  });

  after(async () => {
    await balancer?.stop();
    await Promise.all(started.map((child) => child.stop()));
    await relay?.close();
    await tracker?.close();
    await dropPrefixKeys(prefix);
  });

  it('a 1.x SDK client connects, lists, calls, answers an elicitation, hears list_changed, and survives a killed instance', async () => {
    const client = new Client({ name: 'sessions-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada' } }));
    let listChanged = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      listChanged++;
    });
    const transport = new StreamableHTTPClientTransport(new URL(`${balancer.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${keyA}` } } });
    await client.connect(transport);
    try {
      assert.equal(transport.protocolVersion, '2025-11-25');
      const tools = await eventually(() => client.listTools(), (list) => list.tools.some((tool) => tool.name === 'relay__levels'), 30_000);
      assert.ok(!tools.tools.some((tool) => tool.name.startsWith('tracker__')));

      // Six calls, two per instance in round robin.
      for (let i = 0; i < 6; i++) assert.match(textOf(await client.callTool({ name: 'relay__levels', arguments: {} })), /^levels: /);

      // An elicitation asked during a call: the client's answer is a new POST, which lands on another instance.
      for (const label of ['one', 'two', 'three']) {
        assert.equal(textOf(await client.callTool({ name: 'relay__ask_name', arguments: { label } })), `${label}: hello Ada`);
      }

      // A catalog change made on one instance directly: the instance holding the GET stream tells the client.
      const put = await call(instances[1]!.url, 'PUT', '/v1/mcp/servers/tracker', { key: ADMIN_KEY, body: { type: 'http', url: tracker.url } });
      assert.equal(put.status, 201, JSON.stringify(put.body));
      await eventually(() => listChanged, (count) => count >= 1, 60_000);
      await eventually(() => client.listTools(), (list) => list.tools.some((tool) => tool.name === 'tracker__create_issue'), 30_000);

      // One instance the session used is killed: the client goes on through the others.
      instances[2]!.process.signal('SIGKILL');
      await instances[2]!.process.exited;
      for (let i = 0; i < 4; i++) assert.match(textOf(await client.callTool({ name: 'relay__levels', arguments: {} })), /^levels: /);
      assert.equal(textOf(await client.callTool({ name: 'relay__ask_name', arguments: { label: 'after' } })), 'after: hello Ada');

      // A GET stream on the session reopened on a live instance (as a client does when its stream broke with the
      // instance) hears the next change, made on another instance. Opened by hand: the 1.x client does not reopen a
      // stream that ended without an error. A live instance already holding the client's own stream answers 409.
      const streamHeaders = { authorization: `Bearer ${keyA}`, accept: 'text/event-stream', 'mcp-session-id': transport.sessionId!, 'mcp-protocol-version': '2025-11-25' };
      let reopened: globalThis.Response | undefined;
      for (const instance of [instances[1]!, instances[0]!]) {
        const response = await fetch(`${instance.url}/mcp`, { headers: streamHeaders });
        if (response.status === 200) {
          reopened = response;
          break;
        }
        assert.equal(response.status, 409);
        await response.body?.cancel();
      }
      assert.ok(reopened, 'a GET stream reopens on a live instance');
      const reader = reopened.body!.getReader();
      let heard = '';
      const listening = (async () => {
        while (!heard.includes('notifications/tools/list_changed')) {
          const { value, done } = await reader.read();
          if (done) break;
          heard += new TextDecoder().decode(value);
        }
      })();
      const removed = await call(instances[0]!.url, 'DELETE', '/v1/mcp/servers/tracker', { key: ADMIN_KEY });
      assert.equal(removed.status, 200, JSON.stringify(removed.body));
      await Promise.race([listening, new Promise((resolve) => setTimeout(resolve, 60_000))]);
      await reader.cancel();
      assert.match(heard, /notifications\/tools\/list_changed/);
    } finally {
      await client.close();
    }
  });

  it('DELETE on one instance ends the session on the others, their GET streams included', async () => {
    const [a, b] = [instances[0]!.url, instances[1]!.url];
    const session = await openSession(a, b, keyA);
    assert.equal((await listed(b, keyA, session)).status, 200);
    // The GET stream held by b.
    const stream = await fetch(`${b}/mcp`, { headers: { authorization: `Bearer ${keyA}`, accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' } });
    assert.equal(stream.status, 200);
    const ended = stream.text();

    const deleted = await fetch(`${a}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${keyA}`, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' } });
    assert.equal(deleted.status, 200);
    await Promise.race([ended, new Promise((_, reject) => setTimeout(() => reject(new Error('the GET stream on the other instance stayed open')), 15_000))]);
    assert.equal((await listed(b, keyA, session)).status, 404);
    assert.equal((await listed(a, keyA, session)).status, 404);
  });

  it('a session opened with key A is refused with key B on another instance', async () => {
    const [a, b] = [instances[0]!.url, instances[1]!.url];
    const session = await openSession(a, a, keyA);
    const refused = await listed(b, keyB, session);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, -32003);
    const del = await fetch(`${b}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${keyB}`, 'mcp-session-id': session } });
    assert.equal(del.status, 403);
    assert.equal((await listed(b, keyA, session)).status, 200);
  });

  it('a session outlives the graceful stop of the instance that opened it (a rolling restart)', async () => {
    const opener = await serve(config);
    const session = await openSession(opener.url, instances[0]!.url, keyA);
    const setLevel = await rpc(opener.url, keyA, { jsonrpc: '2.0', id: 2, method: 'logging/setLevel', params: { level: 'error' } }, session);
    assert.equal(setLevel.status, 200);
    opener.process.signal('SIGTERM');
    await opener.process.exited;
    const replacement = await serve(config);
    try {
      for (const base of [replacement.url, instances[0]!.url, instances[1]!.url]) {
        const answer = await listed(base, keyA, session);
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
        assert.ok((answer.body.result.tools as { name: string }[]).some((tool) => tool.name === 'relay__levels'));
      }
      const called = await rpc(replacement.url, keyA, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'relay__levels', arguments: {} } }, session);
      assert.match(called.body.result.content[0].text, /^levels: /);
    } finally {
      await replacement.process.stop();
    }
  });
});
