import type { Tool } from '../../catalog/types.js';
import { catalogFunction } from '../core/tools.js';

/** An OpenAI chat-completions function tool, as forwarded upstream. */
export interface OpenAiFunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters: Record<string, unknown> };
}

/** A catalog (MCP) tool in OpenAI function format: its input schema is the function's parameters. */
export function openAiFunctionTool(tool: Tool): OpenAiFunctionTool {
  return { type: 'function', function: catalogFunction(tool) };
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
  return { type: 'function', ...catalogFunction(tool), strict: false };
}
