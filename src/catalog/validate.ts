import { z } from 'zod';
import { schemaProblem } from './json-schema.js';
import { DEFAULT_SCHEMA_LIMITS, schemaLimitProblem, type SchemaLimits } from './schema-limits.js';
import type { Tool } from './types.js';
import { ToolrouterError } from '../errors.js';
import { inSlices } from './slices.js';

/**
 * MCP tool names: 1–128 characters of ASCII letters, digits, `_`, `-` and `.` (the MCP specification's tool-name
 * guidance). Anything else breaks clients that use the name as a function identifier.
 */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
export const SOURCE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/** An object schema, bounded first (size, depth, array and object widths, RE2 patterns), then checked as JSON Schema. */
function objectSchema(limits: SchemaLimits | null) {
  return z.looseObject({ type: z.literal('object', { error: 'must have "type": "object"' }) }).superRefine((schema, ctx) => {
    const bounded = schemaLimitProblem(schema, limits ?? UNBOUNDED);
    if (bounded !== undefined) {
      ctx.addIssue({ code: 'custom', message: bounded });
      return;
    }
    // Call-time argument validation relies on the schema being valid JSON Schema.
    const problem = schemaProblem(schema);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `is not a valid JSON Schema: ${problem}` });
  });
}

function toolSchemaFor(limits: SchemaLimits | null) {
  return z.looseObject({
    name: z
      .string({ error: 'is required and must be a string' })
      .regex(TOOL_NAME_PATTERN, 'must be 1-128 characters of A-Z, a-z, 0-9, "_", "-" or "."'),
    title: z.string().max(1_000).optional(),
    description: z.string().max(100_000).optional(),
    inputSchema: objectSchema(limits),
    outputSchema: objectSchema(limits).optional(),
    annotations: z.looseObject({}).optional(),
    _meta: z.looseObject({}).optional(),
  });
}

/** For snapshots already validated by an API instance (whose limits may be raised above the defaults). */
const UNBOUNDED: SchemaLimits = { depth: Infinity, bytes: Infinity, arrayItems: Infinity, objectKeys: Infinity, patternLength: Infinity };
const toolSchemas = new Map<SchemaLimits | null, ReturnType<typeof toolSchemaFor>>();

export class ToolValidationError extends ToolrouterError {
  override readonly name = 'ToolValidationError';
  constructor(message: string) {
    super('invalid_request', message);
  }
}

/**
 * Validates a list of MCP tool objects; the message names every bad tool and field, so one round-trip fixes all.
 * `limits` null: trusted input (a snapshot another instance validated), only the JSON Schema checks run.
 */
export function validateTools(input: unknown, limits: SchemaLimits | null = DEFAULT_SCHEMA_LIMITS): Tool[] {
  const validator = new ToolsValidator(input, limits);
  validator.input.forEach((candidate, position) => validator.add(candidate, position));
  return validator.result();
}

/** `validateTools` with the event loop handed back every few milliseconds (a 100k-tool list takes seconds). */
export async function validateToolsInSlices(input: unknown, limits: SchemaLimits | null = DEFAULT_SCHEMA_LIMITS): Promise<Tool[]> {
  const validator = new ToolsValidator(input, limits);
  const candidates = validator.input;
  await inSlices(candidates.length, (position) => validator.add(candidates[position], position));
  return validator.result();
}

/** One list's validation, a tool at a time: problems are collected, so the error names all of them. */
class ToolsValidator {
  private readonly toolSchema: ReturnType<typeof toolSchemaFor>;
  private readonly problems: string[] = [];
  private readonly seen = new Set<string>();
  private readonly tools: Tool[] = [];
  readonly input: readonly unknown[];

  constructor(input: unknown, limits: SchemaLimits | null) {
    if (!Array.isArray(input)) throw new ToolValidationError('"tools" must be an array of MCP tool objects');
    this.input = input;
    let toolSchema = toolSchemas.get(limits);
    if (!toolSchema) {
      toolSchema = toolSchemaFor(limits);
      toolSchemas.set(limits, toolSchema);
    }
    this.toolSchema = toolSchema;
  }

  add(candidate: unknown, position: number): void {
    const parsed = this.toolSchema.safeParse(candidate);
    const label = describeTool(candidate, position);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        const field = issue.path.length > 0 ? issue.path.join('.') : 'tool';
        this.problems.push(`${label}: ${field} ${issue.message}`);
      }
      return;
    }
    if (this.seen.has(parsed.data.name)) {
      this.problems.push(`${label}: duplicate name "${parsed.data.name}" in the same source`);
      return;
    }
    this.seen.add(parsed.data.name);
    // The tool as sent, not zod's copy: the schemas transform nothing, and a copy of each tool (and of its schemas'
    // top levels) doubled what a 100,000-tool PUT held until the request was done (issue 55). It also keeps the
    // definition's key order as the client wrote it.
    this.tools.push(candidate as Tool);
  }

  result(): Tool[] {
    const { problems } = this;
    if (problems.length > 0) {
      const shown = problems.slice(0, 20);
      const more = problems.length > shown.length ? ` (and ${problems.length - shown.length} more)` : '';
      throw new ToolValidationError(`invalid tools: ${shown.join('; ')}${more}`);
    }
    return this.tools;
  }
}

function describeTool(candidate: unknown, position: number): string {
  const name = (candidate as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? `tools[${position}] ("${name.slice(0, 64)}")` : `tools[${position}]`;
}
