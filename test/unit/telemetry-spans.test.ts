import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { indexBuildSpan, jobTraceContext, mcpClientToolSpan, mcpServerToolSpan, searchSpan } from '../../src/telemetry/spans.js';
import { startTelemetry, tracing, type Telemetry } from '../../src/telemetry/tracing.js';

/**
 * Spans as the helpers make them, with tracing on in this process (each test file runs in its own process) and an
 * in-memory exporter in place of OTLP. The end-to-end traces across processes are test/integration/telemetry.test.ts.
 */
describe('toolrouter spans', () => {
  const exporter = new InMemorySpanExporter();
  let telemetry: Telemetry;

  before(async () => {
    telemetry = (await startTelemetry({ defaultServiceName: 'toolrouter', exporter }, { OTEL_TRACES_EXPORTER: 'otlp', OTEL_BSP_SCHEDULE_DELAY: '10' }))!;
    assert.ok(telemetry);
  });
  after(() => telemetry.shutdown());

  /** The first exported span named so (or matching), waiting for the batch processor to hand it over. */
  async function finished(match: string | ((span: ReadableSpan) => boolean)) {
    const predicate = typeof match === 'string' ? (span: ReadableSpan) => span.name === match : match;
    for (let i = 0; i < 500; i++) {
      const found = exporter.getFinishedSpans().find(predicate);
      if (found) return found;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`no finished span ${String(match)}: ${exporter.getFinishedSpans().map((span) => span.name).join(', ')}`);
  }

  test('search and tool-call content stays off spans unless content capture is on', async () => {
    await searchSpan({ mode: 'bm25', topK: 3, query: 'secret plans' }, async () => ({ results: [{ tool: { name: 'plans__read' }, score: 0.42, scores: { rerank: 0.5 } }], fallback: { reason: 'embedding_timeout' } }));
    const search = await finished('toolrouter.search');
    assert.equal(search.attributes['toolrouter.search.query'], undefined);
    assert.equal(search.attributes['toolrouter.search.hits'], 1);
    assert.equal(search.attributes['toolrouter.search.rerank'], true);
    assert.equal(search.attributes['toolrouter.search.fallback'], 'embedding_timeout');
    // Names and scores are the router's own (tool names, not content): always on the span, with the outcome.
    assert.deepEqual(search.attributes['toolrouter.search.results'], ['plans__read']);
    assert.deepEqual(search.attributes['toolrouter.search.scores'], [0.42]);
    assert.equal(search.attributes['toolrouter.search.outcome'], 'found');
    await mcpServerToolSpan({ name: 'quiet_tool', arguments: { password: 'hunter2' } }, async () => ({ content: [] }));
    assert.equal((await finished('tools/call quiet_tool')).attributes['gen_ai.tool.call.arguments'], undefined);

    tracing.captureContent = true;
    try {
      await searchSpan({ mode: 'bm25', query: 'captured query' }, async () => ({ results: [] }));
      await mcpClientToolSpan({ name: 'loud_tool', arguments: { city: 'Oslo' } }, async () => ({ content: [] }));
    } finally {
      tracing.captureContent = false;
    }
    const captured = await finished((span) => span.attributes['toolrouter.search.query'] === 'captured query');
    assert.equal(captured.attributes['toolrouter.search.mode'], 'bm25', 'the query is on the span with capture on');
    assert.equal(captured.attributes['toolrouter.search.outcome'], 'abstained', 'a search that returned nothing abstained');
    assert.equal((await finished('tools/call loud_tool')).attributes['gen_ai.tool.call.arguments'], '{"city":"Oslo"}');
  });

  test('a tool result with isError and a thrown error both mark the span failed', async () => {
    await mcpClientToolSpan({ name: 'failing_tool' }, async () => ({ isError: true }));
    const failing = await finished('tools/call failing_tool');
    assert.equal(failing.status.code, 2);
    assert.equal(failing.attributes['error.type'], 'tool_error');
    await assert.rejects(searchSpan({ mode: 'vector', query: 'q' }, async () => Promise.reject(new TypeError('boom'))));
    const thrown = await finished((span) => span.attributes['toolrouter.search.mode'] === 'vector');
    assert.equal(thrown.status.code, 2);
    assert.equal(thrown.attributes['error.type'], 'TypeError');
  });

  test('the job trace context makes the build span a child of the span that queued it, across a serialisation', async () => {
    let data: { trace?: Record<string, string> } = {};
    await mcpServerToolSpan({ name: 'queueing_request' }, async () => {
      data = JSON.parse(JSON.stringify(jobTraceContext())) as typeof data;
      return {};
    });
    const queued = await finished('tools/call queueing_request');
    assert.match(data.trace?.traceparent ?? '', /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    await indexBuildSpan({ catalogHash: 'h', version: 3, attempt: 1, ...data }, async () => ({ outcome: 'built', tools: 12, promoted: true }));
    const build = await finished('toolrouter.index.build');
    assert.equal(build.spanContext().traceId, queued.spanContext().traceId);
    assert.equal(build.parentSpanContext?.spanId, queued.spanContext().spanId);
    assert.equal(build.attributes['toolrouter.index.tools'], 12);
    assert.equal(build.attributes['toolrouter.index.promoted'], true);
  });
});
