import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startRelayHttp, type RelayHttp } from '../fixtures/mcp/relay-server.js';
import { ADMIN_KEY, generateKey } from '../helpers/keys.js';
import { textOf } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const MODERN = '2026-07-28';

/** A real v2 SDK client pinned to 2026-07-28, whose handlers answer the input-required rounds. */
async function modernClient(url: string, key: string, name: string, capabilities: Record<string, unknown>): Promise<{ client: Client; asked: string[] }> {
  const client = new Client({ name: `modern-${name}`, version: '1.0.0' }, { capabilities, versionNegotiation: { mode: { pin: MODERN } } });
  const asked: string[] = [];
  if ('elicitation' in capabilities) {
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push(String(request.params.message));
      return request.params.mode === 'url' ? { action: 'accept' } : { action: 'accept', content: { name } };
    });
  }
  if ('sampling' in capabilities) {
    client.setRequestHandler('sampling/createMessage', async () => {
      asked.push('sampling');
      return { role: 'assistant', model: `${name}-model`, content: { type: 'text', text: 'sampled' } };
    });
  }
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return { client, asked };
}

describe('relay on 2026-07-28: an upstream\'s questions come back as input-required rounds and the call resumes with the answer', () => {
  let api: RunningRouter;
  let web: RelayHttp;

  before(async () => {
    web = await startRelayHttp();
    api = await startRouter({
      adminKey: ADMIN_KEY,
      mcp: {
        search: true,
        callTimeoutMs: 15_000,
        servers: { web: { url: web.url }, st: { command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/relay-server.ts')], cwd: REPO_ROOT } },
      },
    });
    await api.router.mcp.upstreams.settled();
  });

  after(async () => {
    await api?.close();
    await web?.close();
  });

  it('form elicitation and sampling from 2025 upstreams, directly and through call_tool', async () => {
    const { client, asked } = await modernClient(api.url, (await generateKey(api.url, {})).key, 'carol', { elicitation: { form: {}, url: {} }, sampling: {} });
    try {
      assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
      for (const server of ['web', 'st']) {
        assert.equal(textOf(await client.callTool({ name: `${server}__ask_name`, arguments: { label: 'direct' } })), 'direct: hello carol', server);
        assert.equal(textOf(await client.callTool({ name: 'call_tool', arguments: { name: `${server}__ask_name`, arguments: { label: 'through' } } })), 'through: hello carol', server);
        assert.equal(textOf(await client.callTool({ name: `${server}__summarize`, arguments: { text: 'x' } })), 'summary: sampled (model carol-model)', server);
      }
      assert.equal(textOf(await client.callTool({ name: 'web__open_link', arguments: { url: 'https://example.test/x' } })), 'url: accept');
      assert.equal(asked.filter((message) => message.endsWith('what is your name?')).length, 4);
    } finally {
      await client.close();
    }
  });

  it('a 2026-07-28 client without the capabilities: the upstream gets a clean error, no round is offered', async () => {
    const { client } = await modernClient(api.url, (await generateKey(api.url, {})).key, 'dave', {});
    try {
      const result = await client.callTool({ name: 'web__ask_name', arguments: { label: 'D' } });
      assert.match(textOf(result), /^D: elicitation failed: .*did not declare elicitation \(form\)/);
    } finally {
      await client.close();
    }
  });

  it('a requestState is bound to the key it was issued to', async () => {
    const key = (await generateKey(api.url, {})).key;
    const other = (await generateKey(api.url, {})).key;
    const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } } };
    const post = async (bearer: string, params: Record<string, unknown>) => {
      const response = await fetch(`${api.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${bearer}`, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'web__ask_name' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'web__ask_name', arguments: { label: 'R' }, _meta: meta, ...params } }),
      });
      const text = await response.text();
      const data = text.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5)).pop();
      return JSON.parse(data ?? text);
    };
    const first = await post(key, {});
    assert.equal(first.result?.resultType, 'input_required', JSON.stringify(first));
    const [id, request] = Object.entries(first.result.inputRequests)[0] as [string, any];
    assert.equal(request.method, 'elicitation/create');
    const stolen = await post(other, { requestState: first.result.requestState, inputResponses: { [id]: { action: 'accept', content: { name: 'mallory' } } } });
    assert.equal(stolen.error?.code, -32602, JSON.stringify(stolen));
    const answered = await post(key, { requestState: first.result.requestState, inputResponses: { [id]: { action: 'accept', content: { name: 'erin' } } } });
    assert.equal(answered.result?.content?.[0]?.text, 'R: hello erin', JSON.stringify(answered));
  });
});
