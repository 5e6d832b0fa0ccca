import { createServer, type Server } from 'node:http';

/**
 * A local OTLP/HTTP trace receiver, in place of a collector: accepts `POST /v1/traces` with the JSON encoding
 * (OTEL_EXPORTER_OTLP_PROTOCOL=http/json) and keeps every span with its service name, ids as hex, attributes flattened.
 */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  status?: { code?: number; message?: string };
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

export interface OtlpReceiver {
  /** Base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** Export requests received, whatever they held. */
  requests(): number;
  /** Waits until a span matching `predicate` has arrived (polling, bounded by `timeoutMs`). */
  waitFor(what: string, predicate: (span: ReceivedSpan) => boolean, timeoutMs?: number): Promise<ReceivedSpan>;
  close(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}

/** OTLP JSON carries ids as hex; base64 (the protobuf JSON mapping) is accepted as well. */
function hexId(id: string | undefined): string | undefined {
  if (id === undefined || id === '') return undefined;
  return /^[0-9a-f]+$/i.test(id) && (id.length === 32 || id.length === 16) ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex');
}

function plain(value: OtlpValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  return JSON.stringify(value);
}

function attributes(list: { key: string; value: OtlpValue }[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, plain(value)]));
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let requests = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests++;
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('json')) {
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: {
          resource?: { attributes?: { key: string; value: OtlpValue }[] };
          scopeSpans?: { spans?: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: { key: string; value: OtlpValue }[]; status?: { code?: number; message?: string } }[] }[];
        }[];
      };
      for (const resourceSpans of body.resourceSpans ?? []) {
        const service = String(attributes(resourceSpans.resource?.attributes)['service.name'] ?? '');
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            const parentSpanId = hexId(span.parentSpanId);
            spans.push({
              service,
              traceId: hexId(span.traceId)!,
              spanId: hexId(span.spanId)!,
              ...(parentSpanId ? { parentSpanId } : {}),
              name: span.name,
              kind: span.kind,
              attributes: attributes(span.attributes),
              ...(span.status ? { status: span.status } : {}),
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests: () => requests,
    async waitFor(what, predicate, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = spans.find(predicate);
        if (found) return found;
        if (Date.now() > deadline) {
          throw new Error(`no span ${what} within ${timeoutMs} ms; received: ${JSON.stringify(spans.map((span) => `${span.service} ${span.name}`))}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** W3C traceparent `00-<trace id>-<parent span id>-<flags>`. */
export function parseTraceparent(header: string | undefined): { traceId: string; spanId: string } | undefined {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(header ?? '');
  return match ? { traceId: match[1]!, spanId: match[2]! } : undefined;
}
