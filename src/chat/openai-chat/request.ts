import { z } from 'zod';
import type { ConversationStep } from '../core/feedback-capture.js';
import { contentText } from '../core/query.js';
import {
  addIssues,
  assertUniqueNames,
  toolNameSchema as toolName,
  validateBody,
  type FunctionDefinition,
  type RequestTool,
  type ToolRequest,
  type ToolUse,
} from '../core/tool-request.js';

export type { FunctionDefinition, RequestTool } from '../core/tool-request.js';

/**
 * The parts of an OpenAI chat-completions request toolrouter reads. Everything else is the upstream's business: unknown
 * fields pass through, and only what the rewriter relies on is validated, so a request the upstream would accept is
 * not refused here for a field toolrouter never looks at.
 */

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

export interface ChatRequest extends ToolRequest {
  api: 'chat';
  messages: ChatMessage[];
}

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
    if (!parsed.success) addIssues(ctx, parsed.error, ['function']);
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
    if (parsed && !parsed.success) addIssues(ctx, parsed.error);
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

export function parseChatRequest(body: unknown): ChatRequest {
  const data = validateBody(bodySchema, body);
  const rawTools = (data.tools ?? []) as Record<string, unknown>[];
  const tools: RequestTool[] = rawTools.map((definition) =>
    definition.type === 'function' ? { definition, function: definition.function as FunctionDefinition } : { definition },
  );
  assertUniqueNames(tools, (position) => `tools[${position}].function.name`);
  const messages = data.messages as ChatMessage[];
  return {
    api: 'chat',
    body: body as Record<string, unknown>,
    messages,
    tools,
    toolChoiceNames: toolChoiceNames(data.tool_choice),
    toolUse: toolUse(messages),
    turns: messages,
    history: messages,
    stream: data.stream === true,
  };
}

/**
 * Called tools (`tool_calls`, legacy `function_call`) and tools with results in the conversation (`tool` messages,
 * mapped to a name through the assistant's `tool_calls[].id`; legacy `function` messages name it).
 */
function toolUse(messages: readonly ChatMessage[]): ToolUse {
  const callNames = new Map<string, string>();
  const called: string[] = [];
  for (const message of messages) {
    if (message.role !== 'assistant') continue;
    for (const call of message.tool_calls ?? []) {
      const name = call.function?.name ?? call.custom?.name;
      if (name === undefined) continue;
      called.push(name);
      if (call.id !== undefined) callNames.set(call.id, name);
    }
    if (message.function_call) called.push(message.function_call.name);
  }
  const results: string[] = [];
  for (const message of messages) {
    const name = message.role === 'tool' && message.tool_call_id !== undefined ? callNames.get(message.tool_call_id) : message.role === 'function' ? message.name : undefined;
    if (name !== undefined) results.push(name);
  }
  return { called, results };
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

/** The conversation as the chat capture reads it (src/chat/core/feedback-capture.ts): one step per message. */
export function chatSteps(request: ToolRequest): ConversationStep[] {
  return (request as ChatRequest).messages.map((message) => ({
    role: message.role,
    text: contentText(message.content),
    calls: [
      ...(message.tool_calls ?? []).map((call) => ({ id: call.id ?? '', name: call.function?.name ?? call.custom?.name ?? '' })),
      ...(message.function_call ? [{ id: '', name: message.function_call.name }] : []),
    ].filter((call) => call.name !== ''),
    ref: message.tool_call_id ?? message.name ?? '',
  }));
}
