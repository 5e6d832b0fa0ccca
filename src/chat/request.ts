import { z } from 'zod';
import { TOOL_NAME_PATTERN } from '../catalog/validate.js';
import { invalidRequest } from './errors.js';

/**
 * The parts of an OpenAI chat-completions request toolrouter reads. Everything else is the upstream's business: unknown
 * fields pass through, and only what the rewriter relies on is validated, so a request the upstream would accept is
 * not refused here for a field toolrouter never looks at.
 */

export interface FunctionDefinition {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface RequestTool {
  /** The tool object exactly as the caller sent it; a kept tool is forwarded as is. */
  definition: Record<string, unknown>;
  /** Set for `type: "function"` tools, the only kind toolrouter ranks; other kinds are always forwarded. */
  function?: FunctionDefinition;
}

export interface ToolCall {
  id?: string;
  type?: string;
  function?: { name: string };
  custom?: { name: string };
}

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: ToolCall[] | null;
  tool_call_id?: string;
  /** Legacy `role: "function"` results carry the function's name here. */
  name?: string;
  /** Legacy assistant function call. */
  function_call?: { name: string } | null;
}

export interface ChatRequest {
  /** The whole body as parsed; a rewrite replaces only its `tools`. */
  body: Record<string, unknown>;
  messages: ChatMessage[];
  tools: RequestTool[];
  /** Names `tool_choice` makes the model see: a forced function, or the `allowed_tools` list. */
  toolChoiceNames: string[];
  stream: boolean;
}

const toolName = z
  .string({ error: 'is required and must be a string' })
  .regex(TOOL_NAME_PATTERN, 'must be 1-128 characters of a-z, A-Z, 0-9, "_", "-" or "."');

const functionSchema = z.looseObject(
  {
    name: toolName,
    description: z.string({ error: 'must be a string' }).optional(),
    parameters: z.record(z.string(), z.unknown(), { error: 'must be a JSON Schema object' }).optional(),
  },
  { error: 'is required and must be an object' },
);

/** Function tools are checked in full; other kinds (`custom`, provider extensions) only need a type. */
const toolSchema = z
  .looseObject({ type: z.string({ error: 'is required and must be a string' }) }, { error: 'must be a tool object' })
  .superRefine((tool, ctx) => {
    if (tool.type !== 'function') return;
    const parsed = functionSchema.safeParse(tool.function);
    if (parsed.success) return;
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: ['function', ...issue.path] });
  });

const namedObject = z.looseObject({ name: toolName }, { error: 'must be an object with a name' });

/** The tool choices that name tools; other types (provider extensions) pass through unchecked. */
const namedChoices: Record<string, z.ZodType> = {
  function: z.looseObject({ function: namedObject }),
  custom: z.looseObject({ custom: namedObject }),
  allowed_tools: z.looseObject({
    allowed_tools: z.looseObject(
      { tools: z.array(z.looseObject({ type: z.string(), function: namedObject.optional(), custom: namedObject.optional() })) },
      { error: 'must be an object with a tools list' },
    ),
  }),
};

const toolChoiceSchema = z
  .union([z.string(), z.looseObject({ type: z.string() })], {
    error: 'must be "none", "auto", "required" or a tool choice object with a type',
  })
  .superRefine((choice, ctx) => {
    const schema = typeof choice === 'string' ? undefined : namedChoices[choice.type];
    const parsed = schema?.safeParse(choice);
    if (!parsed || parsed.success) return;
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  });

const toolCallSchema = z.looseObject(
  {
    id: z.string().optional(),
    type: z.string().optional(),
    function: z.looseObject({ name: z.string({ error: 'is required and must be a string' }) }).optional(),
    custom: z.looseObject({ name: z.string({ error: 'is required and must be a string' }) }).optional(),
  },
  { error: 'must be a tool call object' },
);

const messageSchema = z.looseObject(
  {
    role: z.string({ error: 'is required and must be a string' }),
    content: z
      .union([z.string(), z.array(z.unknown()), z.null()], { error: 'must be a string, an array of content parts or null' })
      .optional(),
    tool_calls: z.array(toolCallSchema, { error: 'must be an array of tool calls' }).nullish(),
    tool_call_id: z.string({ error: 'must be a string' }).optional(),
    name: z.string({ error: 'must be a string' }).optional(),
    function_call: z.looseObject({ name: z.string() }).nullish(),
  },
  { error: 'must be a message object' },
);

const bodySchema = z.looseObject({
  messages: z
    .array(messageSchema, { error: 'is required and must be an array of messages' })
    .min(1, 'must contain at least one message'),
  tools: z.array(toolSchema, { error: 'must be an array of tools' }).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  stream: z.boolean({ error: 'must be a boolean' }).nullish(),
});

/** Parses request bytes; every problem is a 400 in OpenAI's format, `param` naming the first bad field. */
export function parseChatRequestBytes(bytes: Uint8Array | undefined): ChatRequest {
  if (!bytes || bytes.length === 0) throw invalidRequest('The request body is empty; send a JSON chat completion request.');
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch (error) {
    throw invalidRequest(`The request body is not valid JSON: ${(error as Error).message}`, null, 'invalid_json');
  }
  return parseChatRequest(body);
}

export function parseChatRequest(body: unknown): ChatRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object.', null, 'invalid_json');
  }
  const parsed = bodySchema.safeParse(body);
  if (!parsed.success) {
    const issues = parsed.error.issues;
    const shown = issues.slice(0, 5).map((issue) => `${formatPath(issue.path) || 'body'}: ${issue.message}`);
    const more = issues.length > shown.length ? ` (and ${issues.length - shown.length} more)` : '';
    throw invalidRequest(`Invalid request: ${shown.join('; ')}${more}`, formatPath(issues[0]!.path) || null, 'invalid_value');
  }
  const data = parsed.data;
  const rawTools = (data.tools ?? []) as Record<string, unknown>[];
  const tools: RequestTool[] = rawTools.map((definition) =>
    definition.type === 'function' ? { definition, function: definition.function as FunctionDefinition } : { definition },
  );
  // Ranking and keep-rules work by name: two definitions of one name would make "keep x" ambiguous.
  const firstSeen = new Map<string, number>();
  tools.forEach((tool, position) => {
    const name = tool.function?.name;
    if (name === undefined) return;
    const earlier = firstSeen.get(name);
    if (earlier !== undefined) {
      throw invalidRequest(
        `Duplicate tool name "${name}" in tools[${earlier}] and tools[${position}]; tool names must be unique.`,
        `tools[${position}].function.name`,
        'duplicate_tool_name',
      );
    }
    firstSeen.set(name, position);
  });
  return {
    body: body as Record<string, unknown>,
    messages: data.messages as ChatMessage[],
    tools,
    toolChoiceNames: toolChoiceNames(data.tool_choice),
    stream: data.stream === true,
  };
}

/** Reads names from a `tool_choice` the schema has already checked. */
function toolChoiceNames(choice: unknown): string[] {
  if (typeof choice !== 'object' || choice === null) return [];
  const named = (value: unknown) => (value as { name?: string } | undefined)?.name;
  const { type } = choice as { type: string };
  const fields = choice as Record<string, unknown>;
  const names =
    type === 'function' || type === 'custom'
      ? [named(fields[type])]
      : type === 'allowed_tools'
        ? (fields.allowed_tools as { tools: Record<string, unknown>[] }).tools.flatMap((tool) => [named(tool.function), named(tool.custom)])
        : [];
  return names.filter((name) => name !== undefined);
}

/** `['tools', 3, 'function', 'name']` → `tools[3].function.name`, the form OpenAI uses in `param`. */
function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`;
  return out;
}
