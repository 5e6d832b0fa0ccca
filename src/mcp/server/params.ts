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
