import {
  context,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import { telemetrySettings, type TelemetrySettings } from './settings.js';

/**
 * The process's tracing state. Every span helper asks `tracing.enabled` first and, when it is false, calls the wrapped
 * function directly: no span object, no attribute object, no context switch, so an unconfigured service pays one
 * property read per instrumented call (measured in README "Tracing").
 */
export const tracing: { enabled: boolean; captureContent: boolean; tracer: Tracer | undefined } = {
  enabled: false,
  captureContent: false,
  tracer: undefined,
};

export interface Telemetry {
  settings: TelemetrySettings;
  /** Exports what is still buffered and stops; call before the process exits. */
  shutdown(): Promise<void>;
}

/**
 * Starts tracing for this process when the OTEL_* environment asks for it (see settings.ts), else returns undefined
 * and loads nothing of the SDK. Outgoing fetch() requests (the upstream LLM, HTTP upstream MCP servers, embeddings and
 * rerank providers) get client spans and a W3C `traceparent` header through the official undici instrumentation;
 * toolrouter's own spans come from the helpers in spans.ts.
 */
export async function startTelemetry(
  options: {
    defaultServiceName: string;
    version?: string;
    log?: Logger;
    /** Spans go here instead of the exporter the environment names (an embedding application's own, or a test's). */
    exporter?: SpanExporter;
  },
  env: NodeJS.ProcessEnv = process.env,
): Promise<Telemetry | undefined> {
  const settings = telemetrySettings(env, options.defaultServiceName);
  if (!settings.enabled || tracing.enabled) return undefined;
  const [sdk, core, hooks, resources, undici] = await Promise.all([
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/core'),
    import('@opentelemetry/context-async-hooks'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/instrumentation-undici'),
  ]);
  const exporter =
    options.exporter ??
    (settings.exporter === 'console'
      ? new sdk.ConsoleSpanExporter()
      : settings.protocol === 'http/json'
        ? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter()
        : new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter());
  const ratio = new sdk.TraceIdRatioBasedSampler(settings.samplerRatio);
  const root = { always_on: new sdk.AlwaysOnSampler(), always_off: new sdk.AlwaysOffSampler(), traceidratio: ratio };
  const sampler = settings.sampler.startsWith('parentbased_')
    ? new sdk.ParentBasedSampler({ root: root[settings.sampler.slice('parentbased_'.length) as keyof typeof root] })
    : root[settings.sampler as keyof typeof root];
  // toolrouter's defaults, overridden by OTEL_RESOURCE_ATTRIBUTES and then OTEL_SERVICE_NAME (the env detector's order).
  const resource = resources
    .resourceFromAttributes({ 'service.name': settings.serviceName, ...(options.version ? { 'service.version': options.version } : {}) })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.TracerProvider({
    resource,
    sampler,
    // The exporter packages may pin a neighbouring patch release of sdk-trace; the span interface is the same.
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: exporter as SpanExporter, ...settings.batch })],
  });
  context.setGlobalContextManager(new hooks.AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new core.CompositePropagator({ propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()] }));
  trace.setGlobalTracerProvider(provider);
  // Only requests made inside a toolrouter span: background fetches (an upstream's event stream, pings) start no traces.
  const instrumentation = new undici.UndiciInstrumentation({ requireParentforSpans: true });
  instrumentation.setTracerProvider(provider);
  instrumentation.enable();
  tracing.tracer = provider.getTracer('toolrouter', options.version);
  tracing.captureContent = settings.captureContent;
  tracing.enabled = true;
  options.log?.info(
    { exporter: settings.exporter, protocol: settings.protocol, service: settings.serviceName, sampler: settings.sampler },
    'OpenTelemetry tracing on',
  );
  return {
    settings,
    shutdown: async () => {
      instrumentation.disable();
      await provider.shutdown().catch((error: unknown) => options.log?.warn({ err: error }, 'could not export the last spans'));
    },
  };
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent, when not the active span (a context extracted from a job or an MCP request's `_meta`). */
  parent?: Context;
}

/**
 * Runs `work` inside a span, active for everything it calls; the span ends when the work settles, with an error status
 * and `error.type` when it throws. Callers check `tracing.enabled` first (the helpers in spans.ts do).
 */
export async function inSpan<T>(name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
  const tracer = tracing.tracer!;
  return tracer.startActiveSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes }, options.parent ?? context.active(), async (span) => {
    try {
      return await work(span);
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

export function failed(span: Span, error: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  span.setAttribute('error.type', error instanceof Error ? (((error as { code?: unknown }).code as string | undefined) ?? error.name) : 'Error');
}

/** The active trace context as W3C headers (`traceparent`, `tracestate`): for a job's data or an MCP request's `_meta`. */
export function traceCarrier(): Record<string, string> | undefined {
  if (!tracing.enabled) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent === undefined ? undefined : carrier;
}

/** The context a carrier (job data, `_meta`, headers) names; the active one when it names none. */
export function contextFrom(carrier: Record<string, unknown> | undefined): Context {
  if (!carrier || typeof carrier.traceparent !== 'string') return context.active();
  return propagation.extract(context.active(), carrier, {
    get: (holder, key) => (typeof holder[key] === 'string' ? (holder[key] as string) : undefined),
    keys: (holder) => Object.keys(holder),
  });
}

export { SpanKind };
