import { z } from 'zod';
import { TOOL_NAME_PATTERN } from '../../catalog/validate.js';
import { jsonDeeperThan } from '../../http/json-depth.js';
import { invalidRequest } from './errors.js';

/**
 * What the rewriter needs of a request, whichever API it came in: each dialect's parser (src/chat/openai-chat/request.ts,
 * src/chat/openai-responses/request.ts, src/chat/anthropic/request.ts) validates its own format and fills this in;
 * ranking, keep-rules and token counting then work the same for all.
 */

/** `chat`: `POST /v1/chat/completions`. `responses`: `POST /v1/responses`. `anthropic`: `POST /v1/messages`. */
export type Api = 'chat' | 'responses' | 'anthropic';

export interface FunctionDefinition {
  name: string;
  description?: string | null;
  parameters?: Record<string, unknown> | null;
  [key: string]: unknown;
}

export interface RequestTool {
  /** The tool object exactly as the caller sent it; a kept tool is forwarded as is. */
  definition: Record<string, unknown>;
  /**
   * Set for `type: "function"` tools, the only kind toolrouter ranks (chat: the nested `function`; responses: the
   * tool itself). Other kinds (custom, hosted tools such as web_search or mcp) are always forwarded.
   */
  function?: FunctionDefinition;
}

/** Tools the conversation already used, by name, in conversation order. */
export interface ToolUse {
  /** Tools the model called. */
  called: string[];
  /** Tools whose results are in the conversation (calls mapped to names by their id). */
  results: string[];
}

/** A message the search query may read: its role and its content (a string or content parts). */
export interface Turn {
  role: string;
  content?: unknown;
}

export interface ToolRequest {
  api: Api;
  /** The whole body as parsed; a rewrite replaces only its `tools`. */
  body: Record<string, unknown>;
  tools: RequestTool[];
  /** Names `tool_choice` makes the model see: a forced function, or the `allowed_tools` list. */
  toolChoiceNames: string[];
  toolUse: ToolUse;
  /** The messages, oldest first, that the search query is built from (src/chat/core/query.ts). */
  turns: Turn[];
  /**
   * The conversation as sent, oldest first (chat: `messages`; Responses: `input` as items): a later turn starts with
   * the same items, which is how sticky selection recognises it.
   */
  history: readonly unknown[];
  /** Responses API: the response this request continues. */
  previousResponseId?: string;
  stream: boolean;
}

export const toolNameSchema = z
  .string({ error: 'is required and must be a string' })
  .regex(TOOL_NAME_PATTERN, 'must be 1-128 characters of a-z, A-Z, 0-9, "_", "-" or "."');

/** Parses request bytes as a JSON object; every problem is a 400 (an invalid request). */
export function parseJsonObject(bytes: Uint8Array | undefined, what: string, maxDepth: number): unknown {
  if (!bytes || bytes.length === 0) throw invalidRequest(`The request body is empty; send a JSON ${what}.`);
  // Measured on the bytes, before parsing: a body nested thousands deep parses, then breaks every recursive step after.
  if (jsonDeeperThan(bytes, maxDepth)) {
    throw invalidRequest(`The request body nests deeper than ${maxDepth} levels (limits.jsonDepth).`, null, 'json_too_deep');
  }
  try {
    return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch (error) {
    throw invalidRequest(`The request body is not valid JSON: ${(error as Error).message}`, null, 'invalid_json');
  }
}

/** Checks the body against `schema`; a failure is a 400 listing the first problems, `param` naming the first bad field. */
export function validateBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object.', null, 'invalid_json');
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues;
  const shown = issues.slice(0, 5).map((issue) => `${formatPath(issue.path) || 'body'}: ${issue.message}`);
  const more = issues.length > shown.length ? ` (and ${issues.length - shown.length} more)` : '';
  throw invalidRequest(`Invalid request: ${shown.join('; ')}${more}`, formatPath(issues[0]!.path) || null, 'invalid_value');
}

/** Ranking and keep-rules work by name: two definitions of one name would make "keep x" ambiguous. */
export function assertUniqueNames(tools: readonly RequestTool[], nameParam: (position: number) => string): void {
  const firstSeen = new Map<string, number>();
  tools.forEach((tool, position) => {
    const name = tool.function?.name;
    if (name === undefined) return;
    const earlier = firstSeen.get(name);
    if (earlier !== undefined) {
      throw invalidRequest(
        `Duplicate tool name "${name}" in tools[${earlier}] and tools[${position}]; tool names must be unique.`,
        nameParam(position),
        'duplicate_tool_name',
      );
    }
    firstSeen.set(name, position);
  });
}

/** Copies a nested schema's issues onto the outer value, under `prefix`. */
export function addIssues(ctx: z.RefinementCtx, error: z.ZodError, prefix: PropertyKey[] = []): void {
  for (const issue of error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: [...prefix, ...issue.path] });
}

/** `['tools', 3, 'function', 'name']` → `tools[3].function.name`, the form OpenAI uses in `param`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`;
  return out;
}
