/**
 * Types at the catalog boundary. A `Tool` is an MCP tool definition exactly as `tools/list` returns it;
 * toolrouter never reshapes it, so results can be handed back to clients verbatim.
 */

export interface JsonSchemaObject {
  type: 'object';
  properties?: Record<string, JsonSchemaProperty>;
  required?: string[];
  [key: string]: unknown;
}

export interface JsonSchemaProperty {
  type?: string | string[];
  description?: string;
  [key: string]: unknown;
}

export interface ToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
  [key: string]: unknown;
}

export interface Tool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: JsonSchemaObject;
  outputSchema?: JsonSchemaObject;
  annotations?: ToolAnnotations;
  _meta?: Record<string, unknown>;
}

/** A tool as the catalog holds it: the definition plus where it came from. */
export interface CatalogTool {
  tool: Tool;
  /** Source id: a static source name, or an upstream server name. */
  source: string;
  /** Upstream server name for tools that came from an MCP server; undefined for static sources. */
  server?: string;
}

/** Labelled query for evaluation: the query and the qualified tool names that answer it. */
export interface LabelledQuery {
  query: string;
  expected: string[];
}
