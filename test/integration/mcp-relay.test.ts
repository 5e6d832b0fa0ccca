import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  type ClientCapabilities,
  type ElicitRequest,
  type LoggingMessageNotification,
} from '@modelcontextprotocol/sdk/types.js';
import { startRelayHttp, type RelayHttp } from '../fixtures/mcp/relay-server.js';
import { ADMIN_KEY, generateKey } from '../helpers/keys.js';
import { textOf } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

function relayStdio() {
  return { command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/relay-server.ts')], cwd: REPO_ROOT };
}

/** A real 1.x SDK client on toolrouter's /mcp that answers elicitation as `name` and sampling as `model`. */
interface Person {
  client: Client;
  /** Every elicitation/create this client received. */
  asked: ElicitRequest['params'][];
  sampled: number;
  logs: LoggingMessageNotification['params'][];
}

async function person(url: string, key: string, name: string, capabilities: ClientCapabilities): Promise<Person> {
  const client = new Client({ name: `relay-${name}`, version: '1.0.0' }, { capabilities });
  const who: Person = { client, asked: [], sampled: 0, logs: [] };
  if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      who.asked.push(request.params);
      return request.params.mode === 'url' ? { action: 'accept' } : { action: 'accept', content: { name } };
    });
  }
  if (capabilities.roots) client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: `file:///home/${name}`, name }] }));
  if (capabilities.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
      who.sampled++;
      const asked = request.params.messages[0]?.content;
      return { role: 'assistant', model: `${name}-model`, content: { type: 'text', text: `short (${asked && 'text' in asked ? asked.text.length : 0} chars)` } };
    });
  }
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void who.logs.push(notification.params));
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return who;
}

const ALL: ClientCapabilities = { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} };

describe('relay on 2025-11-25 sessions: elicitation, sampling and logging reach the client whose call caused them', () => {
  let api: RunningRouter;
  let web: RelayHttp;
  let alice: Person;
  let bob: Person;
  let mute: Person;

  before(async () => {
    web = await startRelayHttp();
    api = await startRouter({ adminKey: ADMIN_KEY, mcp: { search: true, callTimeoutMs: 15_000, servers: { web: { url: web.url }, st: relayStdio() } } });
    await api.router.mcp.upstreams.settled();
    alice = await person(api.url, (await generateKey(api.url, {})).key, 'alice', ALL);
    bob = await person(api.url, (await generateKey(api.url, {})).key, 'bob', ALL);
    mute = await person(api.url, (await generateKey(api.url, {})).key, 'mute', {});
  });

  after(async () => {
    for (const who of [alice, bob, mute]) await who?.client.close().catch(() => {});
    await api?.close();
    await web?.close();
  });

  it('form elicitation: directly and through call_tool, from HTTP and stdio upstreams, answered by the caller', async () => {
    for (const server of ['web', 'st']) {
      const direct = await alice.client.callTool({ name: `${server}__ask_name`, arguments: { label: 'direct' } });
      assert.equal(textOf(direct), 'direct: hello alice', `${server}: ${JSON.stringify(direct)}`);
      const through = await alice.client.callTool({ name: 'call_tool', arguments: { name: `${server}__ask_name`, arguments: { label: 'through' } } });
      assert.equal(textOf(through), 'through: hello alice', `${server}: ${JSON.stringify(through)}`);
    }
    assert.deepEqual(
      alice.asked.map((params) => params.message),
      ['direct: what is your name?', 'through: what is your name?', 'direct: what is your name?', 'through: what is your name?'],
    );
    assert.equal(bob.asked.length, 0, 'nothing reached the other session');
  });

  it('URL elicitation reaches the caller with its URL', async () => {
    const before = alice.asked.length;
    const result = await alice.client.callTool({ name: 'call_tool', arguments: { name: 'web__open_link', arguments: { url: 'https://example.test/sign-in' } } });
    assert.equal(textOf(result), 'url: accept');
    const asked = alice.asked[before] as { mode?: string; url?: string };
    assert.equal(asked.mode, 'url');
    assert.equal(asked.url, 'https://example.test/sign-in');
  });

  it('two sessions of different keys calling at once each get only their own question (HTTP upstream)', async () => {
    const aliceBefore = alice.asked.length;
    const bobBefore = bob.asked.length;
    const [a, b] = await Promise.all([
      alice.client.callTool({ name: 'web__ask_name', arguments: { label: 'A', delay_ms: 300 } }),
      bob.client.callTool({ name: 'call_tool', arguments: { name: 'web__ask_name', arguments: { label: 'B', delay_ms: 300 } } }),
    ]);
    assert.equal(textOf(a), 'A: hello alice');
    assert.equal(textOf(b), 'B: hello bob');
    assert.deepEqual(alice.asked.slice(aliceBefore).map((params) => params.message), ['A: what is your name?']);
    assert.deepEqual(bob.asked.slice(bobBefore).map((params) => params.message), ['B: what is your name?']);
  });

  it('over stdio, where the wire does not say which call a request belongs to, concurrent sessions are refused, never crossed', async () => {
    const aliceBefore = alice.asked.length;
    const bobBefore = bob.asked.length;
    const [a, b] = await Promise.all([
      alice.client.callTool({ name: 'st__ask_name', arguments: { label: 'A', delay_ms: 300 } }),
      bob.client.callTool({ name: 'st__ask_name', arguments: { label: 'B', delay_ms: 300 } }),
    ]);
    for (const [result, own] of [
      [a, 'alice'],
      [b, 'bob'],
    ] as const) {
      const said = textOf(result);
      assert.ok(said.endsWith(`hello ${own}`) || /several clients are calling "st" at once/.test(said), said);
    }
    assert.ok(alice.asked.slice(aliceBefore).every((params) => params.message.startsWith('A:')));
    assert.ok(bob.asked.slice(bobBefore).every((params) => params.message.startsWith('B:')));
  });

  it('a client that did not declare elicitation or sampling: the upstream gets a clean error at once, the client nothing', async () => {
    const started = Date.now();
    const elicit = await mute.client.callTool({ name: 'web__ask_name', arguments: { label: 'M' } });
    assert.match(textOf(elicit), /^M: elicitation failed: .*did not declare elicitation \(form\)/);
    const sample = await mute.client.callTool({ name: 'call_tool', arguments: { name: 'st__summarize', arguments: { text: 'hello' } } });
    assert.match(textOf(sample), /sampling failed: .*did not declare sampling/);
    assert.ok(Date.now() - started < 5_000, 'refused at once, not after a timeout');
  });

  it('sampling: the caller\'s model answers, on both upstreams', async () => {
    for (const server of ['web', 'st']) {
      const result = await bob.client.callTool({ name: `${server}__summarize`, arguments: { text: 'a long story' } });
      assert.equal(textOf(result), 'summary: short (23 chars) (model bob-model)', server);
    }
    assert.equal(bob.sampled, 2);
    assert.equal(alice.sampled, 0);
  });

  it('roots: roots/list during a call is answered with the caller\'s roots; a client without roots gives none', async () => {
    for (const server of ['web', 'st']) {
      assert.equal(textOf(await alice.client.callTool({ name: `${server}__roots`, arguments: {} })), 'roots: file:///home/alice', server);
      assert.equal(textOf(await bob.client.callTool({ name: 'call_tool', arguments: { name: `${server}__roots`, arguments: {} } })), 'roots: file:///home/bob', server);
      assert.equal(textOf(await mute.client.callTool({ name: `${server}__roots`, arguments: {} })), 'roots: (none)', server);
    }
  });

  it('completion: prompts and resource templates complete at the server that offers them', async () => {
    const prompt = await alice.client.complete({ ref: { type: 'ref/prompt', name: 'st__paint' }, argument: { name: 'colour', value: 'bl' } });
    assert.deepEqual(prompt.completion.values, ['blue', 'black']);
    const template = await alice.client.complete({ ref: { type: 'ref/resource', uri: 'swatch://{colour}' }, argument: { name: 'colour', value: 'g' } });
    assert.deepEqual(template.completion.values, ['green']);
    await assert.rejects(alice.client.complete({ ref: { type: 'ref/prompt', name: 'nobody__paint' }, argument: { name: 'colour', value: '' } }), /nothing to complete/);
  });

  it('logging: messages logged during a call reach its session, namespaced by server, at the level the session set', async () => {
    await alice.client.setLoggingLevel('info');
    await alice.client.callTool({ name: 'st__chatty', arguments: {} });
    await bob.client.callTool({ name: 'web__chatty', arguments: {} });
    // Notifications may trail the result by a tick.
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(
      alice.logs.map((log) => [log.level, log.logger, log.data]),
      [
        ['info', 'st/worker', 'info message'],
        ['warning', 'st/worker', 'warning message'],
      ],
    );
    assert.deepEqual(
      bob.logs.map((log) => [log.level, log.logger]),
      [
        ['debug', 'web/worker'],
        ['info', 'web/worker'],
        ['warning', 'web/worker'],
      ],
    );
  });
});
