import { z } from 'zod';
import type { ConversationStep } from '../core/feedback-capture.js';
import { contentText } from '../core/query.js';
import {
  addIssues,
  assertUniqueNames,
  toolNameSchema,
  validateBody,
  type FunctionDefinition,
  type RequestTool,
  type ToolRequest,
  type ToolUse,
  type Turn,
} from '../core/tool-request.js';

/**
 * The parts of an OpenAI Responses API request (`POST /v1/responses`) toolrouter reads. As for chat completions,
 * unknown fields and item types pass through, and only what the rewriter relies on is validated.
 *
 * Differences from chat completions that matter here: function tools carry `name`, `description`, `parameters` at the
 * top level; hosted tools (web_search, file_search, code_interpreter, mcp, computer_use_preview, image_generation,
 * custom...) sit in the same list; the conversation is `input` (a string, or items: messages with `input_text`
 * parts, `function_call` and `function_call_output` items, reasoning, references...) plus `instructions`.
 */

export interface ResponsesRequest extends ToolRequest {
  api: 'responses';
}

/** An input item as far as toolrouter looks: messages (with or without `type: "message"`) and tool calls / outputs. */
interface InputItem {
  type?: string;
  role?: string;
  content?: unknown;
  name?: string;
  call_id?: string;
}

/** Call items carry the tool's name; output items point back at a call by `call_id`. */
const CALL_ITEMS = new Set(['function_call', 'custom_tool_call']);
const OUTPUT_ITEMS = new Set(['function_call_output', 'custom_tool_call_output']);

const functionToolSchema = z.looseObject({
  name: toolNameSchema,
  description: z.string({ error: 'must be a string' }).nullish(),
  parameters: z.record(z.string(), z.unknown(), { error: 'must be a JSON Schema object' }).nullish(),
  strict: z.boolean({ error: 'must be a boolean' }).nullish(),
});

/** Function tools are checked in full; other kinds (hosted tools, custom) only need a type and pass through. */
const toolSchema = z
  .looseObject({ type: z.string({ error: 'is required and must be a string' }) }, { error: 'must be a tool object' })
  .superRefine((tool, ctx) => {
    if (tool.type !== 'function') return;
    const parsed = functionToolSchema.safeParse(tool);
    if (!parsed.success) addIssues(ctx, parsed.error);
  });

const namedChoice = z.looseObject({ name: toolNameSchema });

/** Tool choices that name tools; `allowed_tools` entries of other types (mcp, hosted tools) are not checked. */
const toolChoiceSchema = z
  .union([z.string(), z.looseObject({ type: z.string() })], {
    error: 'must be "none", "auto", "required" or a tool choice object with a type',
  })
  .superRefine((choice, ctx) => {
    if (typeof choice === 'string') return;
    if (choice.type === 'function' || choice.type === 'custom') {
      const parsed = namedChoice.safeParse(choice);
      if (!parsed.success) addIssues(ctx, parsed.error);
    } else if (choice.type === 'allowed_tools') {
      const parsed = z
        .array(z.looseObject({ type: z.string({ error: 'is required and must be a string' }) }), { error: 'must be an array of tools' })
        .safeParse(choice.tools);
      if (!parsed.success) return addIssues(ctx, parsed.error, ['tools']);
      parsed.data.forEach((tool, position) => {
        if (tool.type !== 'function' && tool.type !== 'custom') return;
        const named = namedChoice.safeParse(tool);
        if (!named.success) addIssues(ctx, named.error, ['tools', position]);
      });
    }
  });

const contentSchema = z.union([z.string(), z.array(z.unknown())], { error: 'must be a string or an array of content parts' });

const itemSchema = z
  .looseObject(
    {
      type: z.string({ error: 'must be a string' }).optional(),
      role: z.string({ error: 'must be a string' }).optional(),
    },
    { error: 'must be an input item object' },
  )
  .superRefine((item, ctx) => {
    const type = item.type ?? (item.role === undefined ? undefined : 'message');
    if (type === undefined) {
      ctx.addIssue({ code: 'custom', message: 'must be a message (with a role) or an item with a type', path: [] });
    } else if (type === 'message') {
      const parsed = z.looseObject({ role: z.string({ error: 'is required and must be a string' }), content: contentSchema }).safeParse(item);
      if (!parsed.success) addIssues(ctx, parsed.error);
    } else if (CALL_ITEMS.has(type)) {
      const parsed = z.looseObject({ name: z.string({ error: 'is required and must be a string' }), call_id: z.string({ error: 'must be a string' }).optional() }).safeParse(item);
      if (!parsed.success) addIssues(ctx, parsed.error);
    } else if (OUTPUT_ITEMS.has(type)) {
      const parsed = z.looseObject({ call_id: z.string({ error: 'is required and must be a string' }) }).safeParse(item);
      if (!parsed.success) addIssues(ctx, parsed.error);
    }
  });

const bodySchema = z.looseObject({
  // Optional: a follow-up may carry only previous_response_id (or a conversation) and instructions.
  input: z.union([z.string(), z.array(itemSchema)], { error: 'must be a string or an array of input items' }).optional(),
  instructions: z.string({ error: 'must be a string' }).nullish(),
  tools: z.array(toolSchema, { error: 'must be an array of tools' }).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  stream: z.boolean({ error: 'must be a boolean' }).nullish(),
  previous_response_id: z.string({ error: 'must be a string' }).nullish(),
});

export function parseResponsesRequest(body: unknown): ResponsesRequest {
  const data = validateBody(bodySchema, body);
  const rawTools = (data.tools ?? []) as Record<string, unknown>[];
  const tools: RequestTool[] = rawTools.map((definition) =>
    definition.type === 'function' ? { definition, function: definition as FunctionDefinition } : { definition },
  );
  assertUniqueNames(tools, (position) => `tools[${position}].name`);
  const items: InputItem[] = typeof data.input === 'string' ? [{ role: 'user', content: data.input }] : ((data.input ?? []) as InputItem[]);
  const messages = items.filter((item) => (item.type ?? 'message') === 'message' && item.role !== undefined) as Turn[];
  return {
    api: 'responses',
    body: body as Record<string, unknown>,
    tools,
    toolChoiceNames: toolChoiceNames(data.tool_choice),
    toolUse: toolUse(items),
    // `instructions` is the system message of this API; the query reads it only when no user text exists, as in chat.
    turns: data.instructions ? [{ role: 'system', content: data.instructions }, ...messages] : messages,
    history: items,
    ...(typeof data.previous_response_id === 'string' ? { previousResponseId: data.previous_response_id } : {}),
    stream: data.stream === true,
  };
}

/**
 * Called tools are `function_call` (and `custom_tool_call`) items; results are `function_call_output` items, mapped to
 * a name through the call's `call_id`. A result whose call came in an earlier response (`previous_response_id`) has
 * no name here and keeps nothing.
 */
function toolUse(items: readonly InputItem[]): ToolUse {
  const callNames = new Map<string, string>();
  const called: string[] = [];
  for (const item of items) {
    if (item.type === undefined || !CALL_ITEMS.has(item.type) || item.name === undefined) continue;
    called.push(item.name);
    if (item.call_id !== undefined) callNames.set(item.call_id, item.name);
  }
  const results: string[] = [];
  for (const item of items) {
    if (item.type === undefined || !OUTPUT_ITEMS.has(item.type) || item.call_id === undefined) continue;
    const name = callNames.get(item.call_id);
    if (name !== undefined) results.push(name);
  }
  return { called, results };
}

/** Names from a `tool_choice` the schema has already checked: `{type: "function", name}` or an `allowed_tools` list. */
function toolChoiceNames(choice: unknown): string[] {
  if (typeof choice !== 'object' || choice === null) return [];
  const { type, name, tools } = choice as { type: string; name?: string; tools?: { type: string; name?: string }[] };
  if (type === 'function' || type === 'custom') return name === undefined ? [] : [name];
  if (type !== 'allowed_tools') return [];
  return (tools ?? []).flatMap((tool) => ((tool.type === 'function' || tool.type === 'custom') && tool.name !== undefined ? [tool.name] : []));
}

/** The conversation as the chat capture reads it (src/chat/core/feedback-capture.ts): `instructions`, then one step per input item. */
export function responsesSteps(request: ToolRequest): ConversationStep[] {
  const body = request.body as { input?: unknown; instructions?: unknown };
  const steps: ConversationStep[] = [];
  const step = (role: string, text = '', calls: ConversationStep['calls'] = [], ref = '') => steps.push({ role, text, calls, ref });
  if (typeof body.instructions === 'string') step('system', contentText(body.instructions));
  if (typeof body.input === 'string') step('user', contentText(body.input));
  for (const raw of Array.isArray(body.input) ? body.input : []) {
    const item = (raw ?? {}) as { type?: string; role?: string; content?: unknown; name?: string; call_id?: string };
    if (item.type !== undefined && CALL_ITEMS.has(item.type)) step('call', '', item.name ? [{ id: item.call_id ?? '', name: item.name }] : []);
    else if (item.type !== undefined && OUTPUT_ITEMS.has(item.type)) step('output', '', [], item.call_id ?? '');
    else step(item.role ?? item.type ?? '', contentText(item.content));
  }
  return steps;
}
