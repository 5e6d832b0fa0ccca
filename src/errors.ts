/**
 * The one error type toolrouter's own code throws for failures a caller should see (the MCP SDK's model: one error
 * class, a stable code, optional data). The code says what happened and stays the same across releases; each face
 * maps it to its own wire format in one place: REST `{error: {code, message}}` (src/http/errors.ts), OpenAI's
 * `{error: {message, type, param, code}}` and Anthropic's (src/chat/openai/errors.ts, src/chat/anthropic/errors.ts), and JSON-RPC errors on MCP (src/mcp).
 */

/** Stable codes, with the HTTP status each has unless the thrower says otherwise. */
export const ERROR_STATUS = {
  invalid_request: 400,
  invalid_json: 400,
  json_too_deep: 400,
  unauthorized: 401,
  forbidden: 403,
  // Governance (src/policy, src/guardrails, src/audit): a Cedar policy refused the call, a @confirm policy needs a
  // person's yes the caller cannot give, a credential was found in the arguments.
  policy_denied: 403,
  confirmation_required: 403,
  guardrail_blocked: 403,
  /** The caller must first visit a URL (an upstream's authorization for their own account); the body carries it. */
  url_elicitation_required: 403,
  not_found: 404,
  // The MCP gateway's (src/mcp/gateway): a tool nobody serves, arguments its schema refuses, a virtual tool called
  // through call_tool, a list cursor from another query. The REST mirror names them not_found and invalid_request.
  unknown_tool: 404,
  invalid_arguments: 400,
  recursion: 400,
  invalid_cursor: 400,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  busy: 429,
  internal: 500,
  upstream_error: 502,
  upstream_timeout: 504,
  index_not_ready: 503,
  upstream_unavailable: 503,
  redis_unavailable: 503,
  auth_unavailable: 503,
  /** audit.required is set and the audit store cannot take records: calls fail closed. */
  audit_unavailable: 503,
  upstream_not_configured: 503,
  // Code mode (src/codemode): why one execution of model-written code ended. Tool results on MCP; statuses for REST.
  sandbox_timeout: 408,
  sandbox_memory: 413,
  sandbox_calls: 429,
  sandbox_output: 413,
  /** The code itself threw (or did not compile): the model's error to read and fix. */
  sandbox_error: 422,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

function statusOf(code: string): number {
  return (ERROR_STATUS as Record<string, number>)[code] ?? 500;
}

export interface ToolrouterErrorOptions {
  /** The HTTP status, when it is not the code's usual one (a 405 is an invalid_request with another status). */
  status?: number;
  /** For 429 and 503: when the client may try again (sent as Retry-After). */
  retryAfterSeconds?: number;
  /** The request field at fault, when there is one (OpenAI's `param`). */
  param?: string;
  /**
   * Why, in more detail than the code, for faces that can say it: an unauthorized request's credential was `missing`
   * (OpenAI's `missing_api_key`) or wrong (`invalid_api_key`).
   */
  reason?: string;
  /** Fields a client acts on, added to the error body beside code and message (e.g. the URL to visit). */
  details?: Record<string, unknown>;
  cause?: unknown;
}

export class ToolrouterError extends Error {
  override name = 'ToolrouterError';
  readonly status: number;
  readonly retryAfterSeconds?: number;
  readonly param?: string;
  readonly reason?: string;
  readonly details?: Record<string, unknown>;

  constructor(
    /** One of ErrorCode, or a face's own code given with an explicit status. */
    readonly code: ErrorCode | (string & {}),
    message: string,
    options: ToolrouterErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status ?? statusOf(code);
    if (options.retryAfterSeconds !== undefined) this.retryAfterSeconds = options.retryAfterSeconds;
    if (options.param !== undefined) this.param = options.param;
    if (options.reason !== undefined) this.reason = options.reason;
    if (options.details !== undefined) this.details = options.details;
  }
}

/**
 * Errors that are not ToolrouterErrors yet but carry a meaning every face shares: body-parser's (marked with a `type`
 * and a status) and the domain errors of modules that keep their own classes. Anything else is `internal`.
 */
export function toToolrouterError(error: unknown): ToolrouterError {
  if (error instanceof ToolrouterError) return error;
  const marked = error as { type?: string; status?: number; message?: string; code?: unknown };
  if (marked?.type === 'entity.parse.failed') return new ToolrouterError('invalid_json', `malformed JSON body: ${marked.message}`);
  if (marked?.type === 'entity.too.deep') return new ToolrouterError('json_too_deep', marked.message ?? 'JSON body nests too deep');
  if (marked?.type === 'entity.too.large') return new ToolrouterError('payload_too_large', 'request body is larger than the configured limit');
  if (typeof marked?.status === 'number' && marked.status >= 400 && marked.status < 500) {
    return new ToolrouterError('invalid_request', marked.message ?? 'bad request', { status: marked.status });
  }
  return new ToolrouterError('internal', 'internal error', { cause: error });
}
