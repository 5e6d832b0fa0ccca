import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { readJsonRpc, stdioFixtureServer, waitFor } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const MODERN = '2026-07-28';
const LEGACY = '2025-11-25';
const TASKS = 'io.modelcontextprotocol/tasks';

/**
 * One params-validation path (issue 50, item 5): every MCP method on both revisions answers a client's mistake in its
 * params with -32602 and a message naming the field, never -32603 and never the validator's raw dump. Raw JSON-RPC over
 * real HTTP, since SDK clients check their own params before sending.
 */
describe('MCP params mistakes: -32602 naming the field, on 2026-07-28 and 2025-11-25', () => {
  let api: RunningRouter;
  let id = 1;

  before(async () => {
    api = await startRouter({ mcp: { search: true, servers: { files: stdioFixtureServer() } } });
    await waitFor('upstream connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 30_000);
  });

  after(async () => {
    await api?.close();
  });

  async function post(body: unknown, headers: Record<string, string>): Promise<{ response: Response; message: any }> {
    const response = await fetch(`${api.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: JSON.stringify(body),
    });
    // A notification is answered 202 with no body.
    return { response, message: response.status === 202 ? undefined : await readJsonRpc(response) };
  }

  /** The error must be -32602, name `field`, and read as words (no JSON dump of validation issues). */
  function assertReadable(label: string, message: any, field: string): void {
    const error = message?.error;
    assert.ok(error, `${label}: expected an error, got ${JSON.stringify(message)}`);
    assert.equal(error.code, -32602, `${label}: ${JSON.stringify(error)}`);
    assert.match(error.message, new RegExp(`\\b${field}\\b`), `${label} names ${field}: ${error.message}`);
    assert.doesNotMatch(error.message, /"code":|"path":|^\s*\[|\n/, `${label} is not a raw dump: ${error.message}`);
    assert.ok(error.message.length < 400, `${label}: ${error.message.length} characters`);
  }

  // Method, malformed params, the field the answer must name.
  const shared: [string, Record<string, unknown>, string][] = [
    ['tools/list', { cursor: 5 }, 'cursor'],
    ['tools/call', { name: 5 }, 'name'],
    ['resources/list', { cursor: 5 }, 'cursor'],
    ['resources/templates/list', { cursor: 5 }, 'cursor'],
    ['prompts/list', { cursor: 5 }, 'cursor'],
    ['resources/read', { uri: 5 }, 'uri'],
    ['resources/read', {}, 'uri'],
    ['prompts/get', { name: 5 }, 'name'],
    ['prompts/get', { name: 'x', arguments: 'all' }, 'arguments'],
    ['completion/complete', { ref: 'files', argument: { name: 'a', value: 'b' } }, 'ref'],
    ['completion/complete', { ref: { type: 'ref/prompt', name: 'p' } }, 'argument'],
  ];

  it('2026-07-28: every method', async () => {
    const modern: [string, Record<string, unknown>, string][] = [
      ...shared,
      ['tasks/get', { taskId: 5 }, 'taskId'],
      ['tasks/update', { taskId: 5 }, 'taskId'],
      ['tasks/cancel', {}, 'taskId'],
    ];
    const failures: string[] = [];
    for (const [method, params, field] of modern) {
      const { message } = await post(
        {
          jsonrpc: '2.0',
          id: id++,
          method,
          params: {
            ...params,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': MODERN,
              'io.modelcontextprotocol/clientInfo': { name: 'params-by-hand', version: '1' },
              'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
            },
          },
        },
        {
          'mcp-protocol-version': MODERN,
          'mcp-method': method,
          // The revision requires the name (or URI) a request is about in a header too, where the body carries one.
          ...(typeof params.name === 'string' ? { 'mcp-name': params.name } : typeof params.uri === 'string' ? { 'mcp-name': params.uri } : {}),
        },
      );
      try {
        assertReadable(`${MODERN} ${method} ${JSON.stringify(params)}`, message, field);
      } catch (error) {
        failures.push((error as Error).message.split('\n')[0]!);
      }
    }
    assert.deepEqual(failures, []);
  });

  it('2025-11-25: every method, and a second initialize', async () => {
    const opened = await post(
      { jsonrpc: '2.0', id: id++, method: 'initialize', params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'params-by-hand', version: '1' } } },
      {},
    );
    const session = opened.response.headers.get('mcp-session-id');
    assert.ok(session, JSON.stringify(opened.message));
    const headers = { 'mcp-session-id': session, 'mcp-protocol-version': LEGACY };
    await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
    const legacy: [string, Record<string, unknown>, string][] = [
      ...shared,
      ['logging/setLevel', { level: 'loud' }, 'level'],
      ['resources/subscribe', { uri: 5 }, 'uri'],
      ['resources/unsubscribe', {}, 'uri'],
      ['tasks/get', { taskId: 5 }, 'taskId'],
      ['tasks/result', {}, 'taskId'],
      ['tasks/list', { cursor: 5 }, 'cursor'],
      ['tasks/cancel', { taskId: 5 }, 'taskId'],
      ['initialize', { protocolVersion: 5, capabilities: {}, clientInfo: { name: 'again', version: '1' } }, 'protocolVersion'],
    ];
    const failures: string[] = [];
    for (const [method, params, field] of legacy) {
      const { message } = await post({ jsonrpc: '2.0', id: id++, method, params }, headers);
      try {
        assertReadable(`${LEGACY} ${method} ${JSON.stringify(params)}`, message, field);
      } catch (error) {
        failures.push((error as Error).message.split('\n')[0]!);
      }
    }
    assert.deepEqual(failures, []);
  });
});
