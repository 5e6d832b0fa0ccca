/**
 * Tracing is configured by the standard OpenTelemetry environment variables, not by toolrouter's config file: a
 * collector is set up per deployment the same way for every service, and operators already know these names. The
 * exporter reads its own endpoint, headers, timeout and compression (OTEL_EXPORTER_OTLP_*); the SDK (version 3) no
 * longer reads the sampler and batch settings itself, so they are read here.
 */

export type TracesSampler = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

export interface TelemetrySettings {
  /** Whether spans are recorded and exported at all; when false nothing of the SDK is loaded. */
  enabled: boolean;
  /** `otlp` (default once enabled) or `console` (spans printed to stdout, for a quick look). */
  exporter: 'otlp' | 'console';
  /** OTLP over HTTP: `http/protobuf` (the spec's default) or `http/json`. */
  protocol: 'http/protobuf' | 'http/json';
  serviceName: string;
  sampler: TracesSampler;
  /** The ratio of the traceidratio samplers, in [0, 1]. */
  samplerRatio: number;
  batch: { scheduledDelayMillis: number; maxExportBatchSize: number; maxQueueSize: number; exportTimeoutMillis: number };
  /**
   * Prompt and tool-argument content on spans (search queries, MCP tool arguments): off unless
   * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true, the switch the GenAI instrumentations share.
   */
  captureContent: boolean;
}

const SAMPLERS = new Set<TracesSampler>(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']);

export class TelemetrySettingsError extends Error {
  override readonly name = 'TelemetrySettingsError';
}

/**
 * On only when an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or its traces variant) or OTEL_TRACES_EXPORTER is set,
 * and never with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. A bad value is an error naming the variable.
 */
export function telemetrySettings(env: NodeJS.ProcessEnv, defaultServiceName: string): TelemetrySettings {
  const endpoint = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const exporterSetting = value(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporterSetting !== undefined && !['otlp', 'console', 'none'].includes(exporterSetting)) {
    throw new TelemetrySettingsError(`OTEL_TRACES_EXPORTER must be otlp, console or none, got "${exporterSetting}"`);
  }
  const disabled = value(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true' || exporterSetting === 'none';
  const protocolSetting = (value(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? value(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf').toLowerCase();
  if (protocolSetting !== 'http/protobuf' && protocolSetting !== 'http/json') {
    throw new TelemetrySettingsError(`OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (grpc is not bundled), got "${protocolSetting}"`);
  }
  const sampler = (value(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on').toLowerCase() as TracesSampler;
  if (!SAMPLERS.has(sampler)) throw new TelemetrySettingsError(`OTEL_TRACES_SAMPLER must be one of ${[...SAMPLERS].join(', ')}, got "${sampler}"`);
  const ratioText = value(env, 'OTEL_TRACES_SAMPLER_ARG');
  const samplerRatio = ratioText === undefined ? 1 : Number(ratioText);
  if (!Number.isFinite(samplerRatio) || samplerRatio < 0 || samplerRatio > 1) {
    throw new TelemetrySettingsError(`OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, got "${ratioText}"`);
  }
  return {
    enabled: !disabled && (endpoint !== undefined || exporterSetting !== undefined),
    exporter: exporterSetting === 'console' ? 'console' : 'otlp',
    protocol: protocolSetting,
    serviceName: value(env, 'OTEL_SERVICE_NAME') ?? defaultServiceName,
    sampler,
    samplerRatio,
    batch: {
      scheduledDelayMillis: millis(env, 'OTEL_BSP_SCHEDULE_DELAY', 5_000),
      maxExportBatchSize: millis(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512),
      maxQueueSize: millis(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2_048),
      exportTimeoutMillis: millis(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000),
    },
    captureContent: value(env, 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT')?.toLowerCase() === 'true',
  };
}

function value(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const text = env[name]?.trim();
  return text === undefined || text === '' ? undefined : text;
}

function millis(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = value(env, name);
  if (text === undefined) return fallback;
  const number = Number(text);
  if (!Number.isInteger(number) || number < 0) throw new TelemetrySettingsError(`${name} must be a non-negative integer, got "${text}"`);
  return number;
}
