import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema, type ElicitRequest } from '@modelcontextprotocol/sdk/types.js';
import { textOf } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/** @modelcontextprotocol/server-everything from npm, over stdio, as an upstream. */
const EVERYTHING = { command: process.execPath, args: [path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'], cwd: REPO_ROOT };

describe('server-everything behind toolrouter (2025-11-25 session): every tool listed, its elicitation, sampling, logging and task tools work', () => {
  let api: RunningRouter;
  let client: Client;
  const asked: ElicitRequest['params'][] = [];
  let sampled = 0;
  const logs: unknown[] = [];

  before(async () => {
    api = await startRouter({ mcp: { search: true, callTimeoutMs: 30_000, servers: { every: EVERYTHING } } });
    await api.router.mcp.upstreams.settled();
    client = new Client({ name: 'everything-user', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} } });
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params);
      // Declining is a valid answer to any form; what matters here is that the question arrived and the answer returned.
      return { action: 'decline' };
    });
    client.setRequestHandler(CreateMessageRequestSchema, async () => {
      sampled++;
      return { role: 'assistant', model: 'test-model', content: { type: 'text', text: 'sampled by the client' } };
    });
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///work/project', name: 'project' }] }));
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void logs.push(notification.params));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`)));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await api?.close();
  });

  it('lists the tools that need client capabilities and the task-required research tool', async () => {
    const status = api.router.mcp.upstreams.status()[0]!;
    assert.deepEqual(status.skipped, []);
    const names = api.router.catalog
      .snapshot()
      .entries.filter((entry) => entry.source === 'every')
      .map((entry) => entry.tool.name);
    for (const tool of [
      'trigger-elicitation-request',
      'trigger-url-elicitation',
      'trigger-sampling-request',
      'trigger-sampling-request-async',
      'trigger-elicitation-request-async',
      'simulate-research-query',
      'get-roots-list',
      'toggle-simulated-logging',
    ]) {
      assert.ok(names.includes(`every__${tool}`), `${tool} missing from ${names.join(', ')}`);
    }
  });

  it('elicitation (form and URL) and sampling, directly and through call_tool', async () => {
    const form = await client.callTool({ name: 'every__trigger-elicitation-request', arguments: {} });
    assert.match(textOf(form), /decline/i, JSON.stringify(form));
    const url = await client.callTool({ name: 'call_tool', arguments: { name: 'every__trigger-url-elicitation', arguments: { url: 'https://example.test/authorize' } } });
    assert.equal((url as any).isError, undefined, JSON.stringify(url));
    assert.deepEqual(
      asked.map((params) => (params as { mode?: string }).mode ?? 'form'),
      ['form', 'url'],
    );
    const direct = await client.callTool({ name: 'every__trigger-sampling-request', arguments: { prompt: 'hello' } });
    assert.match(textOf(direct), /sampled by the client/);
    const through = await client.callTool({ name: 'call_tool', arguments: { name: 'every__trigger-sampling-request', arguments: { prompt: 'again' } } });
    assert.match(textOf(through), /sampled by the client/);
    assert.equal(sampled, 2);
  });

  it('the async (task-augmented) sampling and elicitation tools: the caller is asked a plain request and the upstream gets its answer', async () => {
    const before = { sampled, asked: asked.length };
    const sampling = await client.callTool({ name: 'every__trigger-sampling-request-async', arguments: { prompt: 'async hello' } }, undefined, { timeout: 30_000 });
    assert.equal((sampling as any).isError, undefined, JSON.stringify(sampling));
    // server-everything reports the client's direct answer with "[SYNC]" and quotes it.
    assert.match(textOf(sampling), /sampled by the client/);
    assert.equal(sampled, before.sampled + 1);
    const elicitation = await client.callTool({ name: 'call_tool', arguments: { name: 'every__trigger-elicitation-request-async', arguments: {} } }, undefined, { timeout: 30_000 });
    assert.equal((elicitation as any).isError, undefined, JSON.stringify(elicitation));
    assert.match(textOf(elicitation), /decline/i);
    assert.equal(asked.length, before.asked + 1);
    // The caller never declared tasks to toolrouter, so it must not see the upstream's task augmentation.
    assert.equal((asked.at(-1) as { task?: unknown }).task, undefined);
  });

  it('the task-required research tool runs to its report, directly and through call_tool', async () => {
    const direct: any = await client.callTool({ name: 'every__simulate-research-query', arguments: { topic: 'gateways' } }, undefined, { timeout: 30_000 });
    assert.equal(direct.isError, undefined, JSON.stringify(direct));
    assert.match(JSON.stringify(direct.content), /gateways/i);
    const through: any = await client.callTool({ name: 'call_tool', arguments: { name: 'every__simulate-research-query', arguments: { topic: 'proxies' } } }, undefined, { timeout: 30_000 });
    assert.equal(through.isError, undefined, JSON.stringify(through));
    assert.match(JSON.stringify(through.content), /proxies/i);
  });

  it('roots: server-everything asks once at connect, outside any call, and gets none (never another session\'s)', async () => {
    const result = await client.callTool({ name: 'every__get-roots-list', arguments: {} });
    const text = textOf(result);
    // Asked at connect (outside any call) it got none; if that answer had not reached it yet, the tool asks again during
    // this call, and toolrouter answers with this caller's own roots. Either way, nothing but the caller's.
    if (!/supports roots but no roots are currently configured/.test(text)) {
      assert.match(text, /Current MCP Roots \(1 total\)/, text);
      assert.match(text, /file:\/\/\/work\/project/);
    }
  });

  it('on 2026-07-28: elicitation, sampling and the research task through input-required rounds, directly and through call_tool', async () => {
    const modern = new ClientV2(
      { name: 'everything-modern', version: '1.0.0' },
      { capabilities: { elicitation: { form: {}, url: {} }, sampling: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    let questions = 0;
    modern.setRequestHandler('elicitation/create', async () => {
      questions++;
      return { action: 'decline' };
    });
    modern.setRequestHandler('sampling/createMessage', async () => {
      questions++;
      return { role: 'assistant', model: 'modern-model', content: { type: 'text', text: 'sampled on 2026' } };
    });
    await modern.connect(new HttpTransportV2(new URL(`${api.url}/mcp`)));
    try {
      assert.equal(modern.getNegotiatedProtocolVersion(), '2026-07-28');
      assert.match(textOf(await modern.callTool({ name: 'every__trigger-elicitation-request', arguments: {} })), /decline/i);
      assert.match(textOf(await modern.callTool({ name: 'call_tool', arguments: { name: 'every__trigger-sampling-request', arguments: { prompt: 'hi' } } })), /sampled on 2026/);
      const research: any = await modern.callTool({ name: 'call_tool', arguments: { name: 'every__simulate-research-query', arguments: { topic: 'relays' } } }, { timeout: 30_000 });
      assert.equal(research.isError, undefined, JSON.stringify(research));
      assert.match(JSON.stringify(research.content), /relays/i);
      assert.equal(questions, 2);
    } finally {
      await modern.close();
    }
  });
});
