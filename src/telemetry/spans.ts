import type { IncomingMessage, ServerResponse } from 'node:http';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import { contextFrom, inSpan, traceCarrier, tracing } from './tracing.js';

/**
 * toolrouter's spans, one helper per kind of work. Each is a thin wrapper the instrumented module puts around one
 * existing call, and each calls the work directly when tracing is off. Names and attributes follow the OpenTelemetry
 * semantic conventions where they exist (HTTP server, GenAI client and embeddings, MCP `tools/call`); toolrouter's own
 * attributes are under `toolrouter.*`. No prompt, query or tool-argument text is recorded unless
 * `tracing.captureContent` (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true).
 */

// GenAI and MCP conventions are still "development" status: their names are copied here, as the semantic-conventions
// package advises for incubating attributes, rather than imported from its unstable entry point.
const GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
const GEN_AI_PROVIDER_NAME = 'gen_ai.provider.name';
const GEN_AI_REQUEST_MODEL = 'gen_ai.request.model';
const GEN_AI_TOOL_NAME = 'gen_ai.tool.name';
const GEN_AI_TOOL_CALL_ARGUMENTS = 'gen_ai.tool.call.arguments';
const MCP_METHOD_NAME = 'mcp.method.name';
const NETWORK_TRANSPORT = 'network.transport';

/** Longest captured text (a query, tool arguments as JSON); content capture is for debugging, not for archiving. */
const MAX_CAPTURED_CHARS = 4_096;

function captured(text: string): string {
  return text.length > MAX_CAPTURED_CHARS ? `${text.slice(0, MAX_CAPTURED_CHARS)}…` : text;
}

// ---------------------------------------------------------------------------------------------------------------------
// HTTP server

interface RoutedRequest extends IncomingMessage {
  /** Express's matched route, once a route handled the request. */
  route?: { path?: unknown };
  path?: string;
}

/**
 * The server span of one incoming request (HTTP semantic conventions), parent taken from its `traceparent` header.
 * Express middleware, mounted first (src/http/app.ts); the request's and response's events run in its context, so
 * work started after the body is read is still its child. Named `METHOD route` once a route matched.
 */
export function httpServerSpan(req: RoutedRequest, res: ServerResponse, next: () => void): void {
  const parent = propagation.extract(ROOT_CONTEXT, req.headers);
  const path = req.path ?? (req.url ?? '/').split('?')[0]!;
  const host = req.headers.host ?? '';
  const colon = host.lastIndexOf(':');
  const span = tracing.tracer!.startSpan(
    req.method ?? 'HTTP',
    {
      kind: SpanKind.SERVER,
      attributes: {
        [ATTR_HTTP_REQUEST_METHOD]: req.method ?? '_OTHER',
        [ATTR_URL_PATH]: path,
        [ATTR_URL_SCHEME]: 'http',
        [ATTR_NETWORK_PROTOCOL_VERSION]: req.httpVersion,
        ...(colon > 0 ? { [ATTR_SERVER_ADDRESS]: host.slice(0, colon), [ATTR_SERVER_PORT]: Number(host.slice(colon + 1)) } : host ? { [ATTR_SERVER_ADDRESS]: host } : {}),
        ...(req.headers['user-agent'] ? { [ATTR_USER_AGENT_ORIGINAL]: req.headers['user-agent'] } : {}),
        ...(req.socket.remoteAddress ? { [ATTR_CLIENT_ADDRESS]: req.socket.remoteAddress } : {}),
      },
    },
    parent,
  );
  const active = trace.setSpan(parent, span);
  let ended = false;
  const end = (closed: boolean) => {
    if (ended) return;
    ended = true;
    const route = typeof req.route?.path === 'string' ? req.route.path : undefined;
    if (route) {
      span.setAttribute(ATTR_HTTP_ROUTE, route);
      span.updateName(`${req.method} ${route}`);
    }
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, res.statusCode);
    // Server spans count only 5xx as errors (a 4xx is the caller's); a connection closed early is one too.
    if (res.statusCode >= 500 || closed) {
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute(ATTR_ERROR_TYPE, closed ? 'connection_closed' : String(res.statusCode));
    }
    span.end();
  };
  res.once('finish', () => end(false));
  res.once('close', () => end(!res.writableFinished));
  context.bind(active, req);
  context.bind(active, res);
  context.with(active, next);
}

// ---------------------------------------------------------------------------------------------------------------------
// Search and embeddings

interface SearchAnswer {
  results: readonly { tool: { name: string }; score: number; scores: { rerank?: number } }[];
  fallback?: { reason: string };
}

/**
 * One search over the live index: mode, top_k, hits, the results' names and scores, its outcome as known when it
 * answers (`found`, or `abstained` when nothing was returned; whether a found tool is then called is the search log's,
 * src/analytics), and whether it fell back to BM25 or was reranked.
 */
export function searchSpan<R extends SearchAnswer>(request: { mode: string; topK?: number; query: string }, work: () => Promise<R>): Promise<R> {
  if (!tracing.enabled) return work();
  const attributes = {
    'toolrouter.search.mode': request.mode,
    ...(request.topK === undefined ? {} : { 'toolrouter.search.top_k': request.topK }),
    ...(tracing.captureContent ? { 'toolrouter.search.query': captured(request.query) } : {}),
  };
  return inSpan('toolrouter.search', { attributes }, async (span) => {
    const answer = await work();
    span.setAttributes({
      'toolrouter.search.hits': answer.results.length,
      'toolrouter.search.results': answer.results.map((hit) => hit.tool.name),
      'toolrouter.search.scores': answer.results.map((hit) => hit.score),
      'toolrouter.search.outcome': answer.results.length === 0 ? 'abstained' : 'found',
      'toolrouter.search.rerank': answer.results.some((hit) => hit.scores.rerank !== undefined),
      ...(answer.fallback ? { 'toolrouter.search.fallback': answer.fallback.reason } : {}),
    });
    return answer;
  });
}

/** Which provider an embedder calls: its own `provider`, else told by its class (the OpenAI-compatible client or the local model). */
function embeddingProvider(embedder: object): string {
  const own = (embedder as { provider?: unknown }).provider;
  if (typeof own === 'string') return own;
  return /openai/i.test(embedder.constructor.name) ? 'openai' : 'toolrouter.local';
}

/** Embedding of a search query (GenAI `embeddings` operation): provider and model. */
export function embeddingSpan<R>(embedder: { modelId: string }, texts: number, work: () => Promise<R>): Promise<R> {
  if (!tracing.enabled) return work();
  const attributes = {
    [GEN_AI_OPERATION_NAME]: 'embeddings',
    [GEN_AI_PROVIDER_NAME]: embeddingProvider(embedder),
    [GEN_AI_REQUEST_MODEL]: embedder.modelId,
    'toolrouter.embedding.texts': texts,
  };
  return inSpan(`embeddings ${embedder.modelId}`, { kind: SpanKind.CLIENT, attributes }, work);
}

// ---------------------------------------------------------------------------------------------------------------------
// Chat proxy

/**
 * One request to the upstream LLM (GenAI `chat` operation, client span): the model asked for, the upstream's address,
 * the proxy round. The fetch inside gets its own HTTP client span and carries `traceparent` upstream.
 */
export function llmSpan<R>(request: { api: string; model: unknown; url: string; round?: number; provider?: string }, work: () => Promise<R>): Promise<R> {
  if (!tracing.enabled) return work();
  const model = typeof request.model === 'string' ? request.model : undefined;
  const url = URL.canParse(request.url) ? new URL(request.url) : undefined;
  const attributes = {
    [GEN_AI_OPERATION_NAME]: 'chat',
    // OpenAI-compatible unless the face says otherwise (the Anthropic Messages face: 'anthropic').
    [GEN_AI_PROVIDER_NAME]: request.provider ?? (request.api === 'anthropic' ? 'anthropic' : 'openai'),
    ...(model ? { [GEN_AI_REQUEST_MODEL]: model } : {}),
    ...(url ? { [ATTR_SERVER_ADDRESS]: url.hostname, [ATTR_SERVER_PORT]: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) } : {}),
    'toolrouter.chat.api': request.api,
    ...(request.round === undefined ? {} : { 'toolrouter.chat.round': request.round }),
  };
  return inSpan(model ? `chat ${model}` : 'chat', { kind: SpanKind.CLIENT, attributes }, async (span) => {
    const turn = await work();
    // A turn the proxy took (the model called the search tool) was answered by the proxy, not passed to the caller.
    span.setAttribute('toolrouter.chat.intercepted', turn !== undefined);
    return turn;
  });
}

/** A call of the proxy's search tool, answered by the proxy between two upstream rounds. */
export function chatSearchCallSpan<R>(request: { api: string; round: number }, work: () => Promise<R>): Promise<R> {
  if (!tracing.enabled) return work();
  return inSpan('toolrouter.chat.search_call', { attributes: { 'toolrouter.chat.api': request.api, 'toolrouter.chat.round': request.round } }, work);
}

// ---------------------------------------------------------------------------------------------------------------------
// MCP

/** A tools/call result (CallToolResult); only its `isError` is read. */
type ToolResult = object;

function toolError(span: Span, result: ToolResult): void {
  // The MCP conventions mark a result with isError as a failed call: the tool ran, and said it failed.
  if ((result as { isError?: unknown }).isError === true) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    span.setAttribute(ATTR_ERROR_TYPE, 'tool_error');
  }
}

/**
 * A `tools/call` this service answers (MCP server span). Its parent is the `traceparent` in the request's `_meta`
 * when the client sent one (the MCP conventions' carrier), else the HTTP request's span.
 */
export function mcpServerToolSpan<R extends ToolResult>(
  request: { name: string; arguments?: unknown; meta?: Record<string, unknown> },
  work: () => Promise<R>,
): Promise<R> {
  if (!tracing.enabled) return work();
  const attributes = {
    [MCP_METHOD_NAME]: 'tools/call',
    [GEN_AI_OPERATION_NAME]: 'execute_tool',
    [GEN_AI_TOOL_NAME]: request.name,
    ...(tracing.captureContent && request.arguments !== undefined ? { [GEN_AI_TOOL_CALL_ARGUMENTS]: captured(JSON.stringify(request.arguments)) } : {}),
  };
  return inSpan(`tools/call ${request.name}`, { kind: SpanKind.SERVER, attributes, parent: contextFrom(request.meta) }, async (span) => {
    const result = await work();
    toolError(span, result);
    return result;
  });
}

/**
 * A `tools/call` forwarded to an upstream MCP server (MCP client span). `work` gets the `_meta` to send: the span's
 * `traceparent` (and `tracestate`), as the MCP conventions carry context; undefined when tracing is off. Over HTTP the
 * request also carries the header (the undici instrumentation).
 */
export function mcpClientToolSpan<R extends ToolResult>(
  request: { name: string; server?: string; transport?: 'stdio' | 'http'; arguments?: unknown },
  work: (meta: Record<string, string> | undefined) => Promise<R>,
): Promise<R> {
  if (!tracing.enabled) return work(undefined);
  const attributes = {
    [MCP_METHOD_NAME]: 'tools/call',
    [GEN_AI_OPERATION_NAME]: 'execute_tool',
    [GEN_AI_TOOL_NAME]: request.name,
    ...(request.server ? { 'toolrouter.upstream.server': request.server } : {}),
    ...(request.transport ? { [NETWORK_TRANSPORT]: request.transport === 'stdio' ? 'pipe' : 'tcp' } : {}),
    ...(tracing.captureContent && request.arguments !== undefined ? { [GEN_AI_TOOL_CALL_ARGUMENTS]: captured(JSON.stringify(request.arguments)) } : {}),
  };
  return inSpan(`tools/call ${request.name}`, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    const result = await work(traceCarrier());
    toolError(span, result);
    return result;
  });
}

// ---------------------------------------------------------------------------------------------------------------------
// Index builds

/** The trace context to put in a queued job's data, so the build is traced under the request that asked for it. */
export function jobTraceContext(): { trace?: Record<string, string> } {
  const carrier = traceCarrier();
  return carrier ? { trace: carrier } : {};
}

/** An index build run by a worker (a consumer span), child of the request whose catalog change queued it. */
export function indexBuildSpan<R extends { outcome: string }>(
  job: { id?: string; catalogHash: string; version: number; attempt: number; trace?: Record<string, unknown> },
  work: () => Promise<R>,
): Promise<R> {
  if (!tracing.enabled) return work();
  const attributes = {
    'toolrouter.index.catalog_hash': job.catalogHash,
    'toolrouter.index.catalog_version': job.version,
    'toolrouter.index.attempt': job.attempt,
    ...(job.id === undefined ? {} : { 'messaging.message.id': job.id }),
    'messaging.system': 'bullmq',
    'messaging.operation.type': 'process',
  };
  return inSpan('toolrouter.index.build', { kind: SpanKind.CONSUMER, attributes, parent: contextFrom(job.trace) }, async (span) => {
    const result = await work();
    span.setAttribute('toolrouter.index.outcome', result.outcome);
    for (const [key, value] of Object.entries(result)) {
      if (key !== 'outcome' && (typeof value === 'number' || typeof value === 'boolean')) span.setAttribute(`toolrouter.index.${key}`, value);
    }
    return result;
  });
}
