import type { JsonSchemaProperty, Tool } from '../../catalog/types.js';
import type { FunctionDefinition } from './tool-request.js';

/** The catalog's limit on descriptions; longer ones are indexed by their beginning. */
const MAX_DESCRIPTION = 100_000;

/**
 * What search reads of a request's function tool, as an MCP tool: name, description, and parameter names with their
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

/** A catalog (MCP) tool as a function, whatever API it is forwarded in: its input schema is the function's parameters. */
export interface CatalogFunction {
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
}

export function catalogFunction(tool: Tool): CatalogFunction {
  const description = tool.description ?? tool.title ?? tool.annotations?.title;
  return { name: tool.name, ...(description === undefined ? {} : { description }), parameters: tool.inputSchema };
}
