import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ADMIN_KEY, generateKey } from '../helpers/keys.js';
import { readJsonRpc } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const FIXTURE = path.join(REPO_ROOT, 'test/fixtures/mcp/relay-server.ts');

describe('client mistakes in JSON-RPC params are -32602 with a readable message, on both revisions', () => {
  let api: RunningRouter;
  let key: string;
  let noSearch: string;

  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, mcp: { search: true, servers: { st: { command: process.execPath, args: ['--import', 'tsx', FIXTURE], cwd: REPO_ROOT } } } });
    await api.router.mcp.upstreams.settled();
    key = (await generateKey(api.url, {})).key;
    noSearch = (await generateKey(api.url, { tool_search_enabled: false })).key;
  });

  after(async () => {
    await api?.close();
  });

  async function post(body: unknown, headers: Record<string, string>): Promise<any> {
    const response = await fetch(`${api.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: JSON.stringify(body),
    });
    return { session: response.headers.get('mcp-session-id'), message: await readJsonRpc(response) };
  }

  async function session(bearer: string): Promise<Record<string, string>> {
    const auth = { authorization: `Bearer ${bearer}` };
    const init = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'errors', version: '1' } } }, auth);
    const headers = { ...auth, 'mcp-session-id': init.session as string, 'mcp-protocol-version': '2025-11-25' };
    await fetch(`${api.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    return headers;
  }

  it('2025-11-25 session: tools/call, resources/read, prompts/get, logging/setLevel', async () => {
    const headers = await session(key);
    const cases: [string, unknown, RegExp][] = [
      ['tools/call', { name: 'st__chatty', arguments: [1, 2] }, /^invalid params for tools\/call: params\.arguments: expected an object, got an array$/],
      ['tools/call', { name: 5 }, /^invalid params for tools\/call: params\.name: expected a string, got a number$/],
      ['resources/read', {}, /^invalid params for resources\/read: params\.uri: required \(a string\)$/],
      ['prompts/get', { name: 'x', arguments: 'y' }, /^invalid params for prompts\/get: params\.arguments: expected an object, got a string$/],
      ['logging/setLevel', { level: 'loud' }, /^invalid params for logging\/setLevel: params\.level: must be one of "debug", "info"/],
    ];
    let id = 1;
    for (const [method, params, message] of cases) {
      const { message: answer } = await post({ jsonrpc: '2.0', id: id++, method, params }, headers);
      assert.equal(answer.error?.code, -32602, `${method} ${JSON.stringify(params)}: ${JSON.stringify(answer)}`);
      assert.match(answer.error.message, message);
    }
    // A well-formed call still works in the same session.
    const { message: ok } = await post({ jsonrpc: '2.0', id: 99, method: 'tools/call', params: { name: 'st__big', arguments: { mb: 0.0001 } } }, headers);
    assert.equal(ok.result?.content?.[0]?.text, 'x'.repeat(105));
  });

  it('2026-07-28 stateless: tools/call params', async () => {
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'errors', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const headers = { authorization: `Bearer ${key}`, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call' };
    const array = await post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'st__chatty', arguments: [1, 2], _meta: meta } }, { ...headers, 'mcp-name': 'st__chatty' });
    assert.equal(array.message.error?.code, -32602);
    assert.equal(array.message.error.message, 'invalid params for tools/call: params.arguments: expected an object, got an array');
  });

  it('a key without tool search: the virtual tools are unknown names (-32602) and a query listing is refused (-32003), as the README says', async () => {
    const headers = await session(noSearch);
    const { message: call } = await post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'search_tools', arguments: { query: 'log' } } }, headers);
    assert.equal(call.error?.code, -32602);
    assert.match(call.error.message, /unknown tool "search_tools"/);
    const { message: listed } = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: { query: 'log' } }, headers);
    assert.equal(listed.error?.code, -32003);
    assert.match(listed.error.message, /tool search is disabled for this key/);
  });
});
