/**
 * Tool transformation (the FastMCP pattern): operators rename and re-describe upstream tools and their arguments in
 * config, without touching the upstream. The transformed definition is what the catalog holds (so it is indexed,
 * searched, listed and validated); calls are mapped back to the upstream's own argument names, with hidden values
 * injected. Pure functions, no I/O.
 */
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { JsonSchemaProperty, Tool } from '../../catalog/types.js';

const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

export const argumentTransformSchema = z
  .object({
    /** New argument name as clients see it; calls are sent upstream under the original name. */
    name: z.string().min(1).max(128).optional(),
    description: z.string().optional(),
    /** New default: shown in the schema, sent upstream when the client leaves the argument out. */
    default: z.unknown().optional(),
    /** Removes the argument from the schema; `default` is then always sent upstream. Needs a default. */
    hide: z.boolean().default(false),
    /** true: clients must give it; false: optional (the upstream decides what its absence means). */
    required: z.boolean().optional(),
  })
  .strict();

export const toolTransformSchema = z
  .object({
    /** New tool name, namespaced like any upstream tool (`<server><separator><name>`). */
    name: z.string().regex(TOOL_NAME, 'a tool name is 1-128 characters of A-Z a-z 0-9 _ - .').optional(),
    title: z.string().optional(),
    description: z.string().optional(),
    /** Stored as `_meta.tags` and searchable (appended to the description's searchable text). */
    tags: z.array(z.string().min(1)).optional(),
    /** Merged over the upstream's `_meta`. */
    meta: z.record(z.string(), z.unknown()).optional(),
    /** Merged over the upstream's annotations. */
    annotations: z.record(z.string(), z.unknown()).optional(),
    /** true: the tool is left out of the catalog entirely (not listed, searched or callable). */
    hidden: z.boolean().default(false),
    arguments: z.record(z.string().min(1), argumentTransformSchema).default({}),
  })
  .strict();

export type ArgumentTransform = z.infer<typeof argumentTransformSchema>;
export type ToolTransform = z.infer<typeof toolTransformSchema>;

/**
 * What can be checked without the upstream's schema. Problems name the tool (its key) and the argument.
 */
export function staticTransformProblems(tool: string, spec: ToolTransform): string[] {
  const problems: string[] = [];
  const targets = new Map<string, string>();
  const keys = new Set(Object.keys(spec.arguments));
  for (const [arg, argSpec] of Object.entries(spec.arguments)) {
    if (argSpec.hide && argSpec.default === undefined) {
      problems.push(`tool "${tool}": argument "${arg}" is hidden but has no default (a hidden argument needs a value to send upstream)`);
    }
    if (argSpec.hide && argSpec.required === true) problems.push(`tool "${tool}": argument "${arg}" cannot be both hidden and required`);
    if (argSpec.hide && argSpec.name !== undefined) problems.push(`tool "${tool}": argument "${arg}" is hidden; renaming it has no effect`);
    const target = argSpec.name;
    if (target === undefined || target === arg) continue;
    if (keys.has(target)) problems.push(`tool "${tool}": argument "${arg}" is renamed onto "${target}", which is another argument`);
    const other = targets.get(target);
    if (other !== undefined) problems.push(`tool "${tool}": arguments "${other}" and "${arg}" are both renamed to "${target}"`);
    targets.set(target, arg);
  }
  return problems;
}

/**
 * Applies a transform to an upstream tool (under its qualified name). Returns the transformed definition, or the
 * problems that make the transform unusable with this tool's schema (an unknown argument, a rename onto an existing
 * argument, hiding a required argument without a default).
 */
export function applyTransform(tool: Tool | McpTool, spec: ToolTransform, newName?: string): { tool: Tool } | { problems: string[] } {
  const label = tool.name;
  const problems = staticTransformProblems(label, spec);
  const schema = tool.inputSchema as Tool['inputSchema'];
  const properties = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  for (const [arg, argSpec] of Object.entries(spec.arguments)) {
    if (!Object.hasOwn(properties, arg)) {
      problems.push(`tool "${label}": argument "${arg}" is not in the upstream tool's inputSchema`);
      continue;
    }
    const target = argSpec.name;
    if (target !== undefined && target !== arg && Object.hasOwn(properties, target)) {
      problems.push(`tool "${label}": argument "${arg}" is renamed onto "${target}", which the tool already has`);
    }
  }
  if (problems.length > 0) return { problems: [...new Set(problems)] };

  const newProperties: Record<string, JsonSchemaProperty> = {};
  const newRequired: string[] = [];
  for (const [arg, property] of Object.entries(properties)) {
    const argSpec = spec.arguments[arg];
    if (!argSpec) {
      newProperties[arg] = property;
      if (required.has(arg)) newRequired.push(arg);
      continue;
    }
    if (argSpec.hide) continue;
    const name = argSpec.name ?? arg;
    const next: JsonSchemaProperty = { ...property };
    if (argSpec.description !== undefined) next.description = argSpec.description;
    if (argSpec.default !== undefined) next.default = argSpec.default;
    newProperties[name] = next;
    // A default makes an argument optional unless the operator says otherwise.
    const isRequired = argSpec.required ?? (required.has(arg) && argSpec.default === undefined);
    if (isRequired) newRequired.push(name);
  }
  const { required: _required, properties: _properties, ...restSchema } = schema;
  const inputSchema: Tool['inputSchema'] = { ...restSchema, type: 'object', properties: newProperties };
  if (newRequired.length > 0) inputSchema.required = newRequired;

  const result: Tool = { ...(tool as Tool), name: newName ?? tool.name, inputSchema };
  if (spec.title !== undefined) result.title = spec.title;
  if (spec.description !== undefined) result.description = spec.description;
  if (spec.annotations !== undefined) result.annotations = { ...(tool.annotations ?? {}), ...spec.annotations };
  if (spec.meta !== undefined || spec.tags !== undefined) {
    result._meta = { ...(tool._meta ?? {}), ...(spec.meta ?? {}), ...(spec.tags === undefined ? {} : { tags: [...spec.tags] }) };
  }
  return { tool: result };
}

/**
 * Maps a call's arguments (transformed names) back to the upstream's: renamed arguments go under their original
 * names, hidden arguments get their configured value (whatever the client sent), and arguments with a configured
 * default get it when left out. A client cannot reach a renamed or hidden argument under its original name.
 */
export function mapArguments(spec: ToolTransform, args: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  const entries = Object.entries(spec.arguments);
  if (entries.length === 0) return args;
  const byNewName = new Map<string, string>();
  const shadowed = new Set<string>();
  for (const [arg, argSpec] of entries) {
    if (argSpec.hide) shadowed.add(arg);
    else if (argSpec.name !== undefined && argSpec.name !== arg) {
      byNewName.set(argSpec.name, arg);
      shadowed.add(arg);
    }
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(args ?? {})) {
    const original = byNewName.get(key);
    if (original !== undefined) out[original] = value;
    else if (!shadowed.has(key)) out[key] = value;
  }
  for (const [arg, argSpec] of entries) {
    if (argSpec.default === undefined) continue;
    if (argSpec.hide || !Object.hasOwn(out, arg)) out[arg] = structuredClone(argSpec.default);
  }
  return out;
}

/**
 * The configured server a transform key (a qualified tool name) belongs to: the longest server name that prefixes it
 * with the separator. Undefined when none does, and always with an empty separator (names are not namespaced then).
 */
export function transformServer(key: string, servers: readonly string[], separator: string): string | undefined {
  if (separator === '') return undefined;
  return servers
    .filter((server) => key.startsWith(server + separator) && key.length > server.length + separator.length)
    .sort((a, b) => b.length - a.length)[0];
}
