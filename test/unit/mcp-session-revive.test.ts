/**
 * reviveSession (src/mcp/server/revive.ts) is the one place toolrouter reaches into the 1.x SDK's transport: this test
 * breaks when the SDK changes what it relies on. A fresh SDK server and transport, revived from a session record, serve
 * a real SDK client's next requests on that session id as if they had answered its initialize, with the client's
 * capabilities (an elicitation during a call reaches the client).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ElicitRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { markInitialized, reviveSession } from '../../src/mcp/server/revive.js';

function sdkServer(): Server {
  const server = new Server({ name: 'revive-test', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'ask', inputSchema: { type: 'object' } }] }));
  server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
    const caps = server.getClientCapabilities();
    const answer = await server.elicitInput({ mode: 'form', message: 'name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } }, { relatedRequestId: extra.requestId });
    return { content: [{ type: 'text', text: `${server.getClientVersion()?.name} ${Object.keys(caps ?? {}).join(',')} ${String(answer.content?.name)}` }] };
  });
  return server;
}

/** An HTTP server whose transport can be swapped (the instance that opened the session, then another). */
async function listen(current: () => StreamableHTTPServerTransport): Promise<{ url: string; http: HttpServer }> {
  const http = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => void current().handleRequest(req, res, body === '' ? undefined : JSON.parse(body)));
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, http };
}

describe('reviveSession', () => {
  it('takes over a session a real client opened elsewhere, with its capabilities', async () => {
    const first = new StreamableHTTPServerTransport({ sessionIdGenerator: () => 'session-1' });
    await sdkServer().connect(first);
    let transport = first;
    const { url, http } = await listen(() => transport);
    const client = new Client({ name: 'reviving-client', version: '2.0.0' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada' } }));
    const clientTransport = new StreamableHTTPClientTransport(new URL(url));
    try {
      await client.connect(clientTransport);
      assert.equal(clientTransport.sessionId, 'session-1');

      // Another "instance": a fresh server and transport, revived from what the store keeps.
      const revived = new StreamableHTTPServerTransport({ sessionIdGenerator: () => 'session-1' });
      const server = sdkServer();
      await server.connect(revived);
      await reviveSession(server, revived, {
        id: 'session-1',
        protocolVersion: '2025-11-25',
        clientInfo: { name: 'reviving-client', version: '2.0.0' },
        clientCapabilities: { elicitation: { form: {} } },
        owner: 'k',
        holder: 'k',
        subscriptions: [],
        used: true,
        lastActive: Date.now(),
      });
      transport = revived;
      await first.close();

      assert.equal((await client.listTools()).tools[0]?.name, 'ask');
      const result = await client.callTool({ name: 'ask', arguments: {} });
      assert.equal((result.content as { text: string }[])[0]?.text, 'reviving-client elicitation Ada');
    } finally {
      await client.close();
      http.close();
    }
  });

  it('without it, a fresh transport refuses the session (what reviving fixes)', async () => {
    const fresh = new StreamableHTTPServerTransport({ sessionIdGenerator: () => 'session-2' });
    await sdkServer().connect(fresh);
    const { url, http } = await listen(() => fresh);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': 'session-2' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      assert.equal(response.status, 400);
      markInitialized(fresh, 'session-2');
      assert.equal(fresh.sessionId, 'session-2');
    } finally {
      http.close();
    }
  });

  it('refuses loudly when the transport is not shaped as expected', () => {
    assert.throws(() => markInitialized({} as StreamableHTTPServerTransport, 'x'), /update src\/mcp\/server\/revive\.ts/);
  });
});
