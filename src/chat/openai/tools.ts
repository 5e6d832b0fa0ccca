import type { JsonSchemaProperty, Tool } from '../../catalog/types.js';
import type { Api, FunctionDefinition } from '../core/tool-request.js';

/** An OpenAI chat-completions function tool, as forwarded upstream. */
export interface OpenAiFunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters: Record<string, unknown> };
}

/** The catalog's limit on descriptions; longer ones are indexed by their beginning. */
const MAX_DESCRIPTION = 100_000;

/**
 * What search reads of an OpenAI function, as an MCP tool: name, description, and parameter names with their
 * descriptions. The rest of the schema is left out on purpose: the caller's schema is the upstream LLM's to judge,
 * and indexing must not fail on a dialect quirk the upstream accepts. The tool forwarded upstream is always the
 * caller's own definition, never this projection.
 */
export function indexableTool(fn: FunctionDefinition): Tool {
  const properties: Record<string, JsonSchemaProperty> = {};
  const declared = fn.parameters?.properties;
  if (declared && typeof declared === 'object' && !Array.isArray(declared)) {
    for (const [name, schema] of Object.entries(declared as Record<string, unknown>)) {
      const description = (schema as { description?: unknown } | null)?.description;
      properties[name] = typeof description === 'string' ? { description } : {};
    }
  }
  return {
    name: fn.name,
    ...(typeof fn.description === 'string' ? { description: fn.description.slice(0, MAX_DESCRIPTION) } : {}),
    inputSchema: { type: 'object', properties },
  };
}

/** A catalog (MCP) tool in OpenAI function format: its input schema is the function's parameters. */
export function openAiFunctionTool(tool: Tool): OpenAiFunctionTool {
  const description = tool.description ?? tool.title ?? tool.annotations?.title;
  return {
    type: 'function',
    function: {
      name: tool.name,
      ...(description === undefined ? {} : { description }),
      parameters: tool.inputSchema,
    },
  };
}

/** A Responses API function tool, as forwarded upstream: the function's fields sit at the top level. */
export interface ResponsesFunctionTool {
  type: 'function';
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
  strict: false;
}

/**
 * A catalog (MCP) tool in Responses format. `strict: false` because the Responses API defaults to strict mode, which
 * rejects schemas that are not closed (`additionalProperties: false`, every property required), as most MCP schemas are.
 */
export function responsesFunctionTool(tool: Tool): ResponsesFunctionTool {
  const { function: fn } = openAiFunctionTool(tool);
  return { type: 'function', ...fn, strict: false };
}

/** An Anthropic custom tool, as forwarded upstream: the input schema is `input_schema`. */
export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema: Record<string, unknown>;
}

export function anthropicTool(tool: Tool): AnthropicTool {
  const { function: fn } = openAiFunctionTool(tool);
  return { name: fn.name, ...(fn.description === undefined ? {} : { description: fn.description }), input_schema: fn.parameters };
}

/** A catalog tool as a function tool of the given API. */
export function catalogFunctionTool(api: Api, tool: Tool): OpenAiFunctionTool | ResponsesFunctionTool | AnthropicTool {
  return api === 'responses' ? responsesFunctionTool(tool) : api === 'anthropic' ? anthropicTool(tool) : openAiFunctionTool(tool);
}
