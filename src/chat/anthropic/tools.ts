import type { Tool } from '../../catalog/types.js';
import { catalogFunction } from '../core/tools.js';

/** An Anthropic custom tool, as forwarded upstream: the input schema is `input_schema`. */
export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema: Record<string, unknown>;
}

/** A catalog (MCP) tool as an Anthropic custom tool. */
export function anthropicTool(tool: Tool): AnthropicTool {
  const fn = catalogFunction(tool);
  return { name: fn.name, ...(fn.description === undefined ? {} : { description: fn.description }), input_schema: fn.parameters };
}
