import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { trace } from '@opentelemetry/api';
import { Counter, Registry } from 'prom-client';
import { embeddingSpan, jobTraceContext, llmSpan, mcpClientToolSpan, searchSpan } from '../../src/telemetry/spans.js';
import { telemetrySettings, TelemetrySettingsError } from '../../src/telemetry/settings.js';
import { BoundedLabels, countToolTokens } from '../../src/telemetry/token-accounting.js';
import { startTelemetry, traceCarrier, tracing } from '../../src/telemetry/tracing.js';

describe('tracing settings from the OTEL_* environment', () => {
  test('off unless an OTLP endpoint or OTEL_TRACES_EXPORTER is set', () => {
    assert.equal(telemetrySettings({}, 'toolrouter').enabled, false);
    assert.equal(telemetrySettings({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_TRACES_SAMPLER: 'always_on' }, 't').enabled, false);
    assert.equal(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, 't').enabled, true);
    assert.equal(telemetrySettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, 't').enabled, true);
    assert.equal(telemetrySettings({ OTEL_TRACES_EXPORTER: 'console' }, 't').exporter, 'console');
    assert.equal(telemetrySettings({ OTEL_TRACES_EXPORTER: 'otlp' }, 't').enabled, true);
  });

  test('OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none win over an endpoint', () => {
    assert.equal(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }, 't').enabled, false);
    assert.equal(telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }, 't').enabled, false);
  });

  test('defaults: http/protobuf, parent-based always-on sampling, the given service name, no content capture', () => {
    const settings = telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, 'toolrouter-worker');
    assert.equal(settings.protocol, 'http/protobuf');
    assert.equal(settings.sampler, 'parentbased_always_on');
    assert.equal(settings.serviceName, 'toolrouter-worker');
    assert.equal(settings.captureContent, false);
    assert.equal(settings.batch.scheduledDelayMillis, 5_000);
    const custom = telemetrySettings(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_SERVICE_NAME: 'router-eu',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      'toolrouter',
    );
    assert.deepEqual([custom.serviceName, custom.sampler, custom.samplerRatio, custom.captureContent, custom.batch.scheduledDelayMillis], ['router-eu', 'parentbased_traceidratio', 0.25, true, 100]);
  });

  test('a bad value is an error naming the variable', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /OTEL_EXPORTER_OTLP_PROTOCOL .*grpc/],
      [{ OTEL_TRACES_EXPORTER: 'zipkin' }, /OTEL_TRACES_EXPORTER .*zipkin/],
      [{ OTEL_TRACES_SAMPLER: 'sometimes' }, /OTEL_TRACES_SAMPLER .*sometimes/],
      [{ OTEL_TRACES_SAMPLER_ARG: '2' }, /OTEL_TRACES_SAMPLER_ARG .*"2"/],
      [{ OTEL_BSP_SCHEDULE_DELAY: '-1' }, /OTEL_BSP_SCHEDULE_DELAY .*"-1"/],
    ];
    for (const [env, message] of cases) {
      assert.throws(() => telemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', ...env }, 't'), (error: Error) => error instanceof TelemetrySettingsError && message.test(error.message));
    }
  });
});

describe('with tracing off', () => {
  test('startTelemetry loads nothing and the span helpers call straight through', async () => {
    assert.equal(await startTelemetry({ defaultServiceName: 'toolrouter' }, { OTEL_SERVICE_NAME: 'x' }), undefined);
    assert.equal(tracing.enabled, false);
    const inside: unknown[] = [];
    const work = async () => {
      inside.push(trace.getActiveSpan());
      return { results: [], outcome: 'built', isError: false };
    };
    await searchSpan({ mode: 'hybrid', query: 'q' }, work);
    await embeddingSpan({ modelId: 'm' }, 1, work);
    await llmSpan({ api: 'chat', model: 'm', url: 'http://llm/v1' }, work);
    let meta: unknown = 'unset';
    await mcpClientToolSpan({ name: 't' }, async (given) => ((meta = given), work()));
    assert.deepEqual(inside, [undefined, undefined, undefined, undefined]);
    assert.equal(meta, undefined, 'no _meta to send upstream');
    assert.equal(traceCarrier(), undefined);
    assert.deepEqual(jobTraceContext(), {}, 'no trace context in job data');
  });
});

describe('token accounting', () => {
  test('key labels are bounded: past the limit every new key counts as "other"', () => {
    const labels = new BoundedLabels(2);
    assert.deepEqual(['a', 'b', 'c', 'a', 'd', 'b'].map((value) => labels.label(value)), ['a', 'b', 'other', 'a', 'other', 'b']);
  });

  test('offered and forwarded tokens are counted by face and key (key id, else the kind of caller)', async () => {
    const registry = new Registry();
    const counters = {
      toolTokensOffered: new Counter({ name: 'offered', help: 'o', labelNames: ['face', 'key'] as const, registers: [registry] }),
      toolTokensForwarded: new Counter({ name: 'forwarded', help: 'f', labelNames: ['face', 'key'] as const, registers: [registry] }),
      tokenKeyLabels: new BoundedLabels(10),
    };
    countToolTokens(counters, 'chat', { kind: 'key', key: { keyId: 'k1' } }, { offered: 900, forwarded: 300 });
    countToolTokens(counters, 'chat', { kind: 'key', key: { keyId: 'k1' } }, { offered: 100, forwarded: 100 });
    countToolTokens(counters, 'mcp', { kind: 'open' }, { offered: 50, forwarded: 20 });
    const values = async (counter: Counter<'face' | 'key'>) => (await counter.get()).values.map(({ labels, value }) => `${labels.face}/${labels.key}=${value}`).sort();
    assert.deepEqual(await values(counters.toolTokensOffered), ['chat/key:k1=1000', 'mcp/open=50']);
    assert.deepEqual(await values(counters.toolTokensForwarded), ['chat/key:k1=400', 'mcp/open=20']);
  });
});
