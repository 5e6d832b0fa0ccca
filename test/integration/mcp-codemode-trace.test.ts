/**
 * Code mode in traces: one `tools/call execute` span per execution, and each call the code makes is a child of it,
 * taking the direct-call path (its own MCP server span, then the MCP client span to the upstream, which receives the
 * trace context). Real parts: a `toolrouter serve` process exporting OTLP/HTTP to a local receiver, a real upstream.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startTracedFixture, type TracedFixture } from '../fixtures/mcp/traced-server.js';
import { connectHttpClient, waitFor } from '../helpers/mcp.js';
import { startServe, type CliProcess } from '../helpers/ops-processes.js';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { writeConfig } from '../helpers/processes.js';

describe('code mode traces', () => {
  let receiver: OtlpReceiver;
  let upstream: TracedFixture;
  let api: { process: CliProcess; url: string };
  let client: Client;

  before(async () => {
    [receiver, upstream] = await Promise.all([startOtlpReceiver(), startTracedFixture()]);
    const config = writeConfig({ port: 0, host: '127.0.0.1', mcp: { servers: { traced: { url: upstream.url } }, search: true, codeMode: true } });
    api = await startServe(config, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '50' });
    await api.process.waitFor((line) => line.msg === 'OpenTelemetry tracing on');
    await waitFor('the upstream to connect', async () => {
      const servers = (await (await fetch(`${api.url}/v1/mcp/servers`)).json()) as { servers: { status: string }[] };
      return servers.servers.every((server) => server.status === 'connected');
    }, 60_000);
    ({ client } = await connectHttpClient(api.url));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await api?.process.stop();
    await Promise.all([receiver?.close(), upstream?.close()]);
  });

  test('one span per execution, a child span per call from the code', async () => {
    const result: any = await client.callTool({
      name: 'execute',
      arguments: { code: `const a = await call_tool('traced__lookup_invoice', {number: 1}); const b = await call_tool('traced__lookup_invoice', {number: 2}); return [a, b];` },
    });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    const execution = await receiver.waitFor('execute span', (s) => s.name === 'tools/call execute' && s.kind === SPAN_KIND.server);
    const calls = await waitFor('two call spans under the execution', () => {
      const children = receiver.spans.filter((s) => s.name === 'tools/call traced__lookup_invoice' && s.parentSpanId === execution.spanId);
      return children.length === 2 ? children : undefined;
    });
    for (const call of calls) {
      assert.equal(call.kind, SPAN_KIND.server, 'the direct-call path: the gateway\'s own tools/call span');
      assert.equal(call.traceId, execution.traceId);
      const client = await receiver.waitFor('client span', (s) => s.kind === SPAN_KIND.client && s.parentSpanId === call.spanId);
      assert.equal(client.name, 'tools/call traced__lookup_invoice');
    }
    const seen = upstream.calls.filter((call) => call.tool === 'lookup_invoice' && call.meta?.includes(execution.traceId));
    assert.equal(seen.length, 2, 'the upstream received the execution\'s trace context with both calls');
  });
});
