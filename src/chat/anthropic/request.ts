import { z } from 'zod';
import type { ConversationStep } from '../core/feedback-capture.js';
import { contentText } from '../core/query.js';
import { addIssues, assertUniqueNames, toolNameSchema, validateBody, type FunctionDefinition, type RequestTool, type ToolRequest, type ToolUse, type Turn } from '../core/tool-request.js';

/**
 * The parts of an Anthropic Messages API request (`POST /v1/messages`, and `/v1/messages/count_tokens`) toolrouter
 * reads. As for the OpenAI APIs, unknown fields pass through and only what the rewriter relies on is validated.
 *
 * Custom tools (`{name, description, input_schema}`, with no `type` or `type: "custom"`) are ranked, read as functions
 * whose parameters are the input schema. Tools with any other `type` — server tools (web_search, code_execution,
 * tool_search...), Anthropic-defined client tools (bash, text_editor, memory...), MCP toolsets — are always kept.
 * The conversation is `messages` (content a string or blocks: `text`, `tool_use`, `tool_result`...) plus `system`.
 */

export interface AnthropicRequest extends ToolRequest {
  api: 'anthropic';
}

const customToolSchema = z.looseObject({
  name: toolNameSchema,
  description: z.string({ error: 'must be a string' }).optional(),
  input_schema: z.record(z.string(), z.unknown(), { error: 'is required and must be a JSON Schema object' }),
});

const isCustom = (tool: { type?: unknown }) => tool.type === undefined || tool.type === 'custom';

const toolSchema = z
  .looseObject({ type: z.string({ error: 'must be a string' }).optional() }, { error: 'must be a tool object' })
  .superRefine((tool, ctx) => {
    if (!isCustom(tool)) return;
    const parsed = customToolSchema.safeParse(tool);
    if (!parsed.success) addIssues(ctx, parsed.error);
  });

const toolChoiceSchema = z.looseObject({ type: z.string({ error: 'is required and must be a string' }) }, { error: 'must be a tool choice object with a type' }).superRefine((choice, ctx) => {
  if (choice.type !== 'tool') return;
  const parsed = z.looseObject({ name: toolNameSchema }).safeParse(choice);
  if (!parsed.success) addIssues(ctx, parsed.error);
});

const messageSchema = z.looseObject(
  {
    role: z.string({ error: 'is required and must be a string' }),
    content: z.union([z.string(), z.array(z.looseObject({ type: z.string({ error: 'is required and must be a string' }) }, { error: 'must be a content block object' }))], {
      error: 'is required and must be a string or an array of content blocks',
    }),
  },
  { error: 'must be a message object' },
);

const bodySchema = z.looseObject({
  messages: z.array(messageSchema, { error: 'is required and must be an array of messages' }),
  system: z.union([z.string(), z.array(z.unknown())], { error: 'must be a string or an array of text blocks' }).optional(),
  tools: z.array(toolSchema, { error: 'must be an array of tools' }).optional(),
  tool_choice: toolChoiceSchema.optional(),
  stream: z.boolean({ error: 'must be a boolean' }).optional(),
});

interface Block {
  type: string;
  id?: unknown;
  name?: unknown;
  tool_use_id?: unknown;
  content?: unknown;
}

export function parseAnthropicRequest(body: unknown): AnthropicRequest {
  const data = validateBody(bodySchema, body);
  const rawTools = (data.tools ?? []) as Record<string, unknown>[];
  const tools: RequestTool[] = rawTools.map((definition) =>
    isCustom(definition)
      ? { definition, function: { name: definition.name, description: definition.description, parameters: definition.input_schema } as FunctionDefinition }
      : { definition },
  );
  assertUniqueNames(tools, (position) => `tools[${position}].name`);
  const messages = data.messages as { role: string; content: string | Block[] }[];
  const system = data.system;
  const choice = data.tool_choice as { type: string; name?: string } | undefined;
  return {
    api: 'anthropic',
    body: body as Record<string, unknown>,
    tools,
    toolChoiceNames: choice?.type === 'tool' && choice.name !== undefined ? [choice.name] : [],
    toolUse: toolUse(messages),
    turns: [...(system === undefined ? [] : [{ role: 'system', content: system }]), ...(messages as Turn[])],
    // The system prompt is part of what a conversation is: two agents with other prompts never share a selection.
    history: system === undefined ? messages : [{ role: 'system', content: system }, ...messages],
    stream: data.stream === true,
  };
}

/**
 * Called tools are `tool_use` blocks of assistant turns; results are `tool_result` blocks, mapped by `tool_use_id`, and
 * the tools their `tool_reference` blocks load.
 */
function toolUse(messages: readonly { role: string; content: string | Block[] }[]): ToolUse {
  const callNames = new Map<string, string>();
  const called: string[] = [];
  const results: string[] = [];
  for (const { content } of messages) {
    if (typeof content === 'string') continue;
    for (const block of content) {
      if (block.type === 'tool_use' && typeof block.name === 'string') {
        called.push(block.name);
        if (typeof block.id === 'string') callNames.set(block.id, block.name);
      }
    }
  }
  for (const { content } of messages) {
    if (typeof content === 'string') continue;
    for (const block of content) {
      if (block.type !== 'tool_result') continue;
      const name = typeof block.tool_use_id === 'string' ? callNames.get(block.tool_use_id) : undefined;
      if (name !== undefined) results.push(name);
      // A caller's own tool search (Claude Code with ENABLE_TOOL_SEARCH) loads tools by tool_reference: the API
      // refuses a reference to a tool the request no longer has, so referenced tools stay.
      for (const part of Array.isArray(block.content) ? (block.content as { type?: unknown; tool_name?: unknown }[]) : []) {
        if (part?.type === 'tool_reference' && typeof part.tool_name === 'string') results.push(part.tool_name);
      }
    }
  }
  return { called, results };
}

/**
 * The conversation as the chat capture reads it (src/chat/core/feedback-capture.ts): `tool_use` blocks are an assistant
 * step's calls; a `tool_result` block refers to its call's id.
 */
export function anthropicSteps(request: ToolRequest): ConversationStep[] {
  const body = request.body as { system?: unknown; messages?: unknown };
  const steps: ConversationStep[] = [];
  if (body.system !== undefined) steps.push({ role: 'system', text: contentText(body.system), calls: [], ref: '' });
  for (const raw of Array.isArray(body.messages) ? body.messages : []) {
    const message = (raw ?? {}) as { role?: string; content?: unknown };
    const blocks = (Array.isArray(message.content) ? message.content : []) as { type?: string; id?: string; name?: string; tool_use_id?: string }[];
    steps.push({
      role: message.role ?? '',
      text: contentText(message.content),
      calls: blocks.filter((block) => block.type === 'tool_use' && typeof block.name === 'string').map((block) => ({ id: block.id ?? '', name: block.name! })),
      ref: blocks.find((block) => block.type === 'tool_result')?.tool_use_id ?? '',
    });
  }
  return steps;
}
