import { SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** What the last failed HTTP response of an upstream said, for the error it caused (the SDK keeps only the body). */
export interface HttpFailure {
  status: number;
  statusText: string;
  wwwAuthenticate?: string;
  /** The start of the response body (the v2 client's negotiation errors do not keep it). */
  body?: string;
}

const BODY_EXCERPT_CHARS = 200;
const MCP_PREFIX = /^(MCP error -?\d+: )(?:MCP error -?\d+: )+/;

/** Drops repeats of the "MCP error <code>: " prefix that a relayed SDK error carries. */
export function withoutRepeatedCode(message: string): string {
  return message.replace(MCP_PREFIX, '$1');
}

/**
 * The real cause of an upstream failure in one line: the HTTP status with WWW-Authenticate and a body excerpt, or the
 * network error under "fetch failed" (ECONNREFUSED, ENOTFOUND, a TLS certificate problem), instead of the SDK's
 * generic "connection closed".
 */
export function describeUpstreamError(error: unknown, http?: HttpFailure): string {
  // The v2 client's HTTP failure (upstream connections): the status is in its data.
  if (error instanceof SdkHttpError && error.status > 0) {
    const known: HttpFailure = http && http.status === error.status ? http : { status: error.status, statusText: error.statusText ?? '' };
    // The recorded body when there is one: the negotiation probe's error replaces it with its own sentence.
    const body = known.body?.trim() || error.message.replace(/^(Error POSTing to endpoint|Failed to open SSE stream): ?/, '').trim();
    const challenge = known.wwwAuthenticate ? ` (WWW-Authenticate: ${excerpt(known.wwwAuthenticate)})` : '';
    return `HTTP ${known.status}${known.statusText ? ` ${known.statusText}` : ''}${challenge}${body ? `: ${excerpt(body)}` : ''}`;
  }
  // A failed server/discover probe or initialize: the v2 client says "... (HTTP 401)" and drops the body.
  const probeStatus = error instanceof SdkError && !(error instanceof SdkHttpError) ? /\(HTTP (\d{3})\)/.exec(error.message)?.[1] : undefined;
  if (http && probeStatus === String(http.status)) {
    const challenge = http.wwwAuthenticate ? ` (WWW-Authenticate: ${excerpt(http.wwwAuthenticate)})` : '';
    const body = http.body?.trim() ? http.body : error instanceof Error ? error.message : '';
    return `HTTP ${http.status}${http.statusText ? ` ${http.statusText}` : ''}${challenge}${body ? `: ${excerpt(body)}` : ''}`;
  }
  if (error instanceof StreamableHTTPError && (error.code ?? 0) > 0) {
    const body = error.message.replace(/^Streamable HTTP error: (Error POSTing to endpoint|Failed to open SSE stream): ?/, '').trim();
    const status = http && http.status === error.code ? `HTTP ${http.status}${http.statusText ? ` ${http.statusText}` : ''}` : `HTTP ${error.code}`;
    const challenge = http && http.status === error.code && http.wwwAuthenticate ? ` (WWW-Authenticate: ${excerpt(http.wwwAuthenticate)})` : '';
    return `${status}${challenge}${body ? `: ${excerpt(body)}` : ''}`;
  }
  const parts: string[] = [];
  let current: unknown = error;
  // Bounded: a cause chain could in principle loop.
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    if (current instanceof Error) {
      // A system error's code (ECONNREFUSED) says what happened; the SDK's own codes only repeat its message.
      const code = current instanceof SdkError ? undefined : (current as NodeJS.ErrnoException).code;
      const message = withoutRepeatedCode(current.message).replace(SDK_INTERNALS, '');
      parts.push(typeof code === 'string' && !message.includes(code) ? `${message} (${code})` : message);
      current = current.cause;
    } else {
      parts.push(String(current));
      break;
    }
  }
  return parts.filter((part) => part.length > 0).join(': ') || 'unknown error';
}

/** Asides in the SDK's messages about its own mechanics, which say nothing to an operator. */
const SDK_INTERNALS = / \(this transport probed in place[^)]*\)/g;

/**
 * Why a connection attempt failed, in one line. A server that went away before answering (a stdio process that
 * exited, typically for a missing setting its stderr names) is said so, rather than as the SDK's account of its
 * version negotiation, which stays in the debug log.
 */
export function describeConnectFailure(error: unknown, transport: 'stdio' | 'http' | 'sse', http?: HttpFailure): string {
  const closedEarly =
    error instanceof SdkError &&
    !(error instanceof SdkHttpError) &&
    (error.code === SdkErrorCode.ConnectionClosed || (error.code === SdkErrorCode.EraNegotiationFailed && /\bclosed\b/i.test(error.message)));
  if (closedEarly) {
    return transport === 'stdio' ? 'the server process exited before answering' : 'the server closed the connection before answering';
  }
  return describeUpstreamError(error, http);
}

/** The first bytes of a failed response's body, read from a clone (the SDK reads the original). */
export async function bodyExcerpt(response: Response): Promise<string> {
  const reader = response.clone().body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    // Bounded: an error body is read only as far as the excerpt needs.
    while (size < BODY_EXCERPT_CHARS * 4) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } catch {
    // A body that fails mid-way still gives what was read.
  } finally {
    void reader.cancel().catch(() => {});
  }
  return Buffer.concat(chunks).toString('utf8');
}

function excerpt(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > BODY_EXCERPT_CHARS ? `${flat.slice(0, BODY_EXCERPT_CHARS)}…` : flat;
}

/** Longest lastError reason kept: a status line with a body excerpt fits; a dump does not. */
const MAX_LINE_CHARS = 500;
/** Validation issues named in a summary; the rest are counted. */
const ISSUES_NAMED = 3;

/**
 * A failure as one readable line: whitespace folded, a validation dump (zod's message is its issues as a JSON array)
 * summarised as "path: message" for the first few issues, and the whole bounded.
 */
export function readableLine(text: string, max = MAX_LINE_CHARS): string {
  const summarised = text.replace(/\[\s*\{[\s\S]*\}\s*\]/, (json) => summariseIssues(json) ?? json);
  const flat = summarised.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

function summariseIssues(json: string): string | undefined {
  let issues: unknown;
  try {
    issues = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (!Array.isArray(issues) || issues.length === 0 || !issues.every((issue) => typeof issue === 'object' && issue !== null && 'message' in issue)) return undefined;
  const named = (issues as { path?: unknown[]; message: unknown }[]).slice(0, ISSUES_NAMED).map((issue) => {
    const path = Array.isArray(issue.path) && issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
    return `${path}: ${String(issue.message).slice(0, 120)}`;
  });
  const more = issues.length > ISSUES_NAMED ? `; and ${issues.length - ISSUES_NAMED} more` : '';
  return `invalid answer (${named.join('; ')}${more})`;
}
