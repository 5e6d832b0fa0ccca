import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { totalTokens } from '../../src/search/tokens.js';
import { startTracedFixture, type TracedFixture } from '../fixtures/mcp/traced-server.js';
import { connectHttpClient, textOf, waitFor } from '../helpers/mcp.js';
import { sample, startServe, startWorker, type CliProcess } from '../helpers/ops-processes.js';
import { parseTraceparent, SPAN_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { REDIS_URL, writeConfig } from '../helpers/processes.js';
import { postJson, startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';

/**
 * Tracing end to end, with real parts: `toolrouter serve` and `toolrouter worker` processes exporting OTLP/HTTP (JSON)
 * to a local receiver, a real upstream MCP server over HTTP that records the trace context it gets, Redis with BullMQ,
 * and the stand-in LLM. Each test follows one trace by its span ids, parent to child, across the processes.
 */

/** 20 function tools, over search.activation's 10: the proxy trims them to chat.k and adds its search tool. */
const REQUEST_TOOLS = [
  'send_email',
  'read_inbox',
  'create_calendar_event',
  'list_calendar_events',
  'create_invoice',
  'refund_payment',
  'upload_file',
  'download_file',
  'post_chat_message',
  'create_ticket',
  'close_ticket',
  'query_database',
  'run_sql_migration',
  'deploy_service',
  'rollback_deploy',
  'get_weather',
  'translate_text',
  'summarize_document',
  'resize_image',
  'geocode_address',
].map((name) => ({
  type: 'function',
  function: {
    name,
    description: `${name.replace(/_/g, ' ')} for the current user`,
    parameters: { type: 'object', properties: { input: { type: 'string', description: `what to ${name.replace(/_/g, ' ')}` } } },
  },
}));

function otelEnv(receiver: OtlpReceiver): Record<string, string> {
  return { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '50' };
}

describe('OpenTelemetry traces across the API, a worker and the upstreams', () => {
  let receiver: OtlpReceiver;
  let llm: StandInLlm;
  let upstream: TracedFixture;
  let api: { process: CliProcess; url: string };
  let worker: { process: CliProcess; metricsUrl: string };
  let client: Client;

  before(async () => {
    [receiver, llm, upstream] = await Promise.all([startOtlpReceiver(), startStandInLlm(), startTracedFixture()]);
    const config = writeConfig({
      port: 0,
      host: '127.0.0.1',
      queue: { prefix: `telemetry-${process.pid}-${Date.now()}` },
      mcp: { servers: { traced: { url: upstream.url } }, search: true },
    });
    const env = { ...otelEnv(receiver), REDIS_URL, UPSTREAM_LLM_URL: llm.url };
    worker = await startWorker(config, env);
    api = await startServe(config, env);
    await api.process.waitFor((line) => line.msg === 'OpenTelemetry tracing on');
    await waitFor(
      'the upstream tools to be indexed',
      async () => {
        const status = (await (await fetch(`${api.url}/v1/index/status`)).json()) as { state: string; tools: number };
        return status.state === 'ready' && status.tools === 2;
      },
      60_000,
    );
    ({ client } = await connectHttpClient(api.url));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await Promise.all([api?.process.stop(), worker?.process.stop()]);
    await Promise.all([receiver?.close(), llm?.close(), upstream?.close()]);
  });

  /** The span with this id, waiting for it to be exported. */
  const span = (id: string | undefined, what: string): Promise<ReceivedSpan> => receiver.waitFor(`${what} (${id})`, (candidate) => candidate.spanId === id);

  test('a catalog PUT and the worker build it queued are one trace: the build span is a child of the API request', async () => {
    const put = await fetch(`${api.url}/v1/catalog/sources/billing`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tools: [{ name: 'export_ledger', description: 'Export the general ledger as CSV', inputSchema: { type: 'object' } }] }),
    });
    assert.equal(put.status, 200);
    const { catalogHash } = (await put.json()) as { catalogHash: string };
    const request = await receiver.waitFor('PUT server span', (s) => s.service === 'toolrouter' && s.name === 'PUT /v1/catalog/sources/:source');
    assert.equal(request.kind, SPAN_KIND.server);
    assert.equal(request.attributes['http.route'], '/v1/catalog/sources/:source');
    assert.equal(request.attributes['http.response.status_code'], 200);
    const build = await receiver.waitFor(
      'worker build span',
      (s) => s.service === 'toolrouter-worker' && s.name === 'toolrouter.index.build' && s.attributes['toolrouter.index.catalog_hash'] === catalogHash,
      60_000,
    );
    assert.equal(build.kind, SPAN_KIND.consumer);
    assert.equal(build.traceId, request.traceId, 'the build belongs to the PUT request trace');
    const parent = await span(build.parentSpanId, 'the build span parent');
    assert.equal(parent.service, 'toolrouter', 'the build span parent is a span of the API process');
    assert.equal(parent.traceId, request.traceId);
    assert.equal(build.attributes['toolrouter.index.outcome'], 'built');
  });

  test('call_tool through the gateway: HTTP, MCP server and MCP client spans, and the upstream gets traceparent in its header and in _meta', async () => {
    const result = await client.callTool({ name: 'call_tool', arguments: { name: 'traced__lookup_invoice', arguments: { number: 7 } } });
    assert.equal(textOf(result), 'lookup_invoice done');
    const call = upstream.calls.at(-1)!;
    assert.equal(call.tool, 'lookup_invoice');
    const meta = parseTraceparent(call.meta);
    const header = parseTraceparent(call.header);
    assert.ok(meta, `_meta.traceparent missing or malformed: ${call.meta}`);
    assert.ok(header, `traceparent header missing or malformed: ${call.header}`);
    assert.equal(header.traceId, meta.traceId);

    // _meta names the MCP client span; the header names the HTTP client span under it.
    const mcpClient = await span(meta.spanId, 'the MCP client span');
    assert.equal(mcpClient.name, 'tools/call traced__lookup_invoice');
    assert.equal(mcpClient.kind, SPAN_KIND.client);
    assert.equal(mcpClient.attributes['mcp.method.name'], 'tools/call');
    assert.equal(mcpClient.attributes['gen_ai.tool.name'], 'traced__lookup_invoice');
    assert.equal(mcpClient.attributes['gen_ai.operation.name'], 'execute_tool');
    assert.equal(mcpClient.attributes['toolrouter.upstream.server'], 'traced');
    assert.equal(mcpClient.attributes['gen_ai.tool.call.arguments'], undefined, 'no tool arguments on spans without content capture');
    const httpClient = await span(header.spanId, 'the HTTP client span to the upstream');
    assert.equal(httpClient.kind, SPAN_KIND.client);
    assert.equal(httpClient.parentSpanId, mcpClient.spanId);

    const mcpServer = await span(mcpClient.parentSpanId, 'the MCP server span');
    assert.equal(mcpServer.name, 'tools/call call_tool');
    assert.equal(mcpServer.kind, SPAN_KIND.server);
    const incoming = await span(mcpServer.parentSpanId, 'the incoming HTTP request span');
    assert.equal(incoming.name, 'POST /mcp');
    assert.equal(incoming.kind, SPAN_KIND.server);
    assert.equal(incoming.traceId, meta.traceId);
  });

  test('search_tools: a search span (mode, top_k, hits) with the query embedding under it, no query text', async () => {
    const result = await client.callTool({ name: 'search_tools', arguments: { query: 'refund a card payment', top_k: 2 } });
    assert.match(textOf(result), /refund_payment/);
    const search = await receiver.waitFor('search span', (s) => s.name === 'toolrouter.search' && s.attributes['toolrouter.search.top_k'] === 2);
    assert.equal(search.attributes['toolrouter.search.mode'], 'hybrid');
    // As many hits as the answer has (min_score may leave fewer than top_k).
    const answered = (result.structuredContent as { tools: unknown[] }).tools.length;
    assert.ok(answered >= 1 && answered <= 2);
    assert.equal(search.attributes['toolrouter.search.hits'], answered);
    assert.equal(search.attributes['toolrouter.search.rerank'], false);
    assert.equal(search.attributes['toolrouter.search.query'], undefined);
    const server = await span(search.parentSpanId, 'the search span parent');
    assert.equal(server.name, 'tools/call search_tools');
    const embedding = await receiver.waitFor('embedding span', (s) => s.parentSpanId === search.spanId && s.attributes['gen_ai.operation.name'] === 'embeddings');
    assert.equal(embedding.attributes['gen_ai.provider.name'], 'toolrouter.local');
    assert.equal(typeof embedding.attributes['gen_ai.request.model'], 'string');
  });

  test('a proxied chat turn: GenAI chat span, traceparent to the LLM, the tokens header and the token counters', async () => {
    const before = await (await fetch(`${api.url}/metrics`)).text();
    llm.reset();
    const answer = await postJson(`${api.url}/v1/chat/completions`, {
      model: 'stand-in',
      messages: [{ role: 'user', content: 'refund the last card payment of this customer' }],
      tools: REQUEST_TOOLS,
    });
    assert.equal(answer.status, 200);
    const sent = llm.received.at(-1)!;
    const forwarded = totalTokens(sent.json.tools as unknown[]);
    const offered = totalTokens(REQUEST_TOOLS);
    assert.ok(sent.json.tools.length < REQUEST_TOOLS.length + 1, 'the request was trimmed');
    assert.ok(forwarded < offered);
    assert.equal(answer.headers.get('x-toolrouter-tokens'), `${forwarded}/${offered}`);

    const parent = parseTraceparent(sent.headers.traceparent as string | undefined);
    assert.ok(parent, `the stand-in LLM got no valid traceparent: ${String(sent.headers.traceparent)}`);
    const httpClient = await span(parent.spanId, 'the HTTP client span to the LLM');
    const chat = await span(httpClient.parentSpanId, 'the GenAI chat span');
    assert.equal(chat.name, 'chat stand-in');
    assert.equal(chat.kind, SPAN_KIND.client);
    assert.equal(chat.attributes['gen_ai.operation.name'], 'chat');
    assert.equal(chat.attributes['gen_ai.request.model'], 'stand-in');
    assert.equal(chat.attributes['gen_ai.provider.name'], 'openai');
    assert.equal(chat.attributes['server.address'], '127.0.0.1');
    assert.equal(chat.attributes['toolrouter.chat.round'], 0);
    const incoming = await span(chat.parentSpanId, 'the proxied request span');
    assert.equal(incoming.name, 'POST /v1/chat/completions');

    const after = await (await fetch(`${api.url}/metrics`)).text();
    const delta = (name: string) => (sample(after, name, { face: 'chat', key: 'open' }) ?? 0) - (sample(before, name, { face: 'chat', key: 'open' }) ?? 0);
    assert.equal(delta('toolrouter_tool_tokens_offered_total'), offered);
    assert.equal(delta('toolrouter_tool_tokens_forwarded_total'), forwarded);
  });

  test('MCP tools/list counts the tokens of every callable tool as listed and of the returned list as served', async () => {
    const before = await (await fetch(`${api.url}/metrics`)).text();
    const { tools } = await client.listTools();
    const catalog = (await (await fetch(`${api.url}/v1/catalog`)).json()) as { tools: { source: string; tool: unknown }[] };
    const callable = catalog.tools.filter((entry) => entry.source === 'traced').map((entry) => entry.tool);
    assert.equal(callable.length, 2);
    const after = await (await fetch(`${api.url}/metrics`)).text();
    const delta = (name: string) => (sample(after, name, { face: 'mcp', key: 'open' }) ?? 0) - (sample(before, name, { face: 'mcp', key: 'open' }) ?? 0);
    assert.equal(delta('toolrouter_tool_tokens_offered_total'), totalTokens(callable));
    assert.equal(delta('toolrouter_tool_tokens_forwarded_total'), totalTokens(tools));
  });
});

describe('without OTEL_* configuration nothing is traced or propagated', () => {
  let llm: StandInLlm;
  let upstream: TracedFixture;
  let api: { process: CliProcess; url: string };
  let client: Client;

  before(async () => {
    [llm, upstream] = await Promise.all([startStandInLlm(), startTracedFixture()]);
    const config = writeConfig({ port: 0, host: '127.0.0.1', mcp: { servers: { traced: { url: upstream.url } }, search: true } });
    // Settings that describe an exporter but do not turn tracing on: no endpoint, no OTEL_TRACES_EXPORTER.
    api = await startServe(config, { UPSTREAM_LLM_URL: llm.url, OTEL_SERVICE_NAME: 'unconfigured', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    await waitFor('the upstream tools', async () => ((await (await fetch(`${api.url}/v1/index/status`)).json()) as { tools: number }).tools === 2, 60_000);
    ({ client } = await connectHttpClient(api.url));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await api?.process.stop();
    await Promise.all([llm?.close(), upstream?.close()]);
  });

  test('no traceparent reaches the LLM or the upstream MCP server (header or _meta), and the tokens header is still set', async () => {
    const answer = await postJson(`${api.url}/v1/chat/completions`, { model: 'stand-in', messages: [{ role: 'user', content: 'send an email' }], tools: REQUEST_TOOLS });
    assert.equal(answer.status, 200);
    assert.equal(llm.received.at(-1)!.headers.traceparent, undefined);
    assert.match(answer.headers.get('x-toolrouter-tokens') ?? '', /^\d+\/\d+$/);
    await client.callTool({ name: 'call_tool', arguments: { name: 'traced__refund_payment', arguments: { payment: 'p_1' } } });
    const call = upstream.calls.at(-1)!;
    assert.equal(call.tool, 'refund_payment');
    assert.equal(call.header, undefined);
    assert.equal(call.meta, undefined);
    assert.ok(!api.process.logs.some((line) => line.msg === 'OpenTelemetry tracing on'));
  });
});
