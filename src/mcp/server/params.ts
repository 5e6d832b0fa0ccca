/**
 * JSON-RPC params checked with a readable answer: a client's mistake in a request's params is `-32602 Invalid params`
 * naming the field and what was expected, not the SDK's `-32603` with a raw validation dump (the 1.x SDK parses params
 * inside the handler call, so any mismatch surfaced as an internal error).
 */
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { RpcError } from './rpc-error.js';

/** A request schema of the SDK: an object with a literal `method`. */
type RequestSchema = z.ZodType & { shape: { method: { value: unknown } } };

/**
 * The same request schema for registration (it lets any params through to the handler), and a parse that throws
 * `-32602` with the problems in words. Use: `server.setRequestHandler(loose(S), (request, extra) => handler(parse(S, request), extra))`.
 */
export function loose<S extends RequestSchema>(schema: S): S {
  return z.looseObject({ method: z.literal(schema.shape.method.value as string), params: z.unknown().optional() }) as unknown as S;
}

export function parseParams<S extends RequestSchema>(schema: S, request: unknown): z.infer<S> {
  const parsed = schema.safeParse(request);
  if (parsed.success) return parsed.data as z.infer<S>;
  const method = String(schema.shape.method.value);
  throw new RpcError(ErrorCode.InvalidParams, `invalid params for ${method}: ${describeIssues(parsed.error.issues)}`);
}

/** Zod issues as one line: "params.arguments: expected an object, got an array; ...". */
export function describeIssues(issues: readonly z.core.$ZodIssue[], prefix: readonly string[] = []): string {
  return issues
    .slice(0, 5)
    .map((issue) => {
      const path = [...prefix, ...issue.path.map(String)];
      const where = path.length === 0 ? 'request' : path.join('.');
      return `${where}: ${readable(issue)}`;
    })
    .join('; ');
}

function readable(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_union' && issue.errors.length > 0) {
    // Each accepted form's own complaint about the value itself ("expected an object"), once each.
    const forms = [...new Set(issue.errors.flatMap((branch) => branch.filter((inner) => inner.path.length === 0).map(readable)))];
    if (forms.length > 0) return forms.join(' or ');
  }
  if (issue.code === 'invalid_type') {
    const received = /received (\w+)/.exec(issue.message)?.[1];
    const expected = issue.expected === 'record' || issue.expected === 'object' ? 'an object' : issue.expected === 'array' ? 'an array' : `a ${issue.expected}`;
    return received === 'undefined' ? `required (${expected})` : `expected ${expected}${received ? `, got ${article(received)}` : ''}`;
  }
  if (issue.code === 'invalid_value') return `must be one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}`;
  return issue.message;
}

function article(type: string): string {
  return type === 'array' || type === 'object' || type === 'undefined' ? `an ${type}` : type === 'null' ? 'null' : `a ${type}`;
}

/**
 * The issues of a params check that failed inside an SDK: a ZodError (the 1.x SDK parses each request with its
 * schema), or the JSON array of issues the v2 SDK puts in a plain Error's message. Anything else is not a params
 * mistake and is left alone.
 */
export function validationIssues(error: unknown): z.core.$ZodIssue[] | undefined {
  if (!(error instanceof Error)) return undefined;
  const candidate = error.name === 'ZodError' && 'issues' in error ? (error as { issues: unknown }).issues : parseJson(error.message);
  if (!Array.isArray(candidate) || candidate.length === 0) return undefined;
  const issues = candidate.every((issue) => typeof issue?.code === 'string' && Array.isArray(issue?.path) && typeof issue?.message === 'string');
  return issues ? (candidate as z.core.$ZodIssue[]) : undefined;
}

function parseJson(text: string): unknown {
  if (!text.trimStart().startsWith('[')) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * A registered request handler whose params check answers `-32602` in words. Both SDKs check a request against the
 * method's schema synchronously, before the handler's own (async) work starts, and answer a failure with `-32603` and
 * the raw issue dump; so only what the call throws synchronously is translated, and an error of the handler's own
 * work (a rejection) is never mistaken for the client's. `invalid` builds the SDK's error type for the message.
 */
export function readableParams<Args extends unknown[], R>(method: string, handler: (...args: Args) => R, invalid: (message: string) => Error): (...args: Args) => R {
  return (...args: Args) => {
    try {
      return handler(...args);
    } catch (error) {
      const issues = validationIssues(error);
      if (issues) throw invalid(`invalid params for ${method}: ${describeIssues(issues)}`);
      throw error;
    }
  };
}

/**
 * Every request handler a 1.x SDK server has, its own included (initialize, tasks/get, tasks/result, tasks/list,
 * tasks/cancel, registered by its constructor from the task store), wrapped by readableParams. Call once all handlers
 * are registered. Reads the SDK's handler map (`_requestHandlers`, not public API); a test runs every method.
 */
export function guardParams(server: object): void {
  const handlers = (server as { _requestHandlers?: Map<string, (...args: unknown[]) => unknown> })._requestHandlers;
  if (!(handlers instanceof Map)) throw new Error('mcp: the SDK server keeps no request handler map; params checks cannot be guarded');
  for (const [method, handler] of handlers) {
    handlers.set(method, readableParams(method, handler, (message) => new RpcError(ErrorCode.InvalidParams, message)));
  }
}
