/**
 * Tools as TypeScript, for search answers with `detail: "code"`: a model writing a program needs each tool's name,
 * what it does and its parameter and result types, not the JSON Schema (which costs several times the tokens). Each
 * tool becomes one overload of `call_tool`, the function code mode gives the code:
 *
 *   /** Add two numbers and return their sum *\/
 *   declare function call_tool(name: "math__add", args: { a: number; b: number }): Promise<{ sum: number }>;
 *
 * Schemas are untrusted input (any upstream can list anything): nesting and length are bounded, and what TypeScript
 * cannot say simply (a $ref, patternProperties) becomes `unknown` rather than a guess.
 */
import type { Tool } from '../catalog/types.js';

/** A tool in a code-detail answer. */
export interface CodeTool {
  name: string;
  signature: string;
}

/** Deepest schema nesting rendered; deeper parts are `unknown`. */
const MAX_DEPTH = 5;
/** Longest type text for one parameter list or result; a longer one is cut to `unknown`-typed fields. */
const MAX_TYPE_CHARS = 4_000;
const DOC_CHARS = 200;
const FIELD_DOC_CHARS = 80;
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

type Schema = Record<string, unknown>;

export function codeTool(tool: Tool): CodeTool {
  return { name: tool.name, signature: toolSignature(tool) };
}

/** The overload declaration of `call_tool` for this tool, with a one-line doc comment. */
export function toolSignature(tool: Tool): string {
  const args = bounded(typeOf(tool.inputSchema, 0, true));
  // Without an outputSchema the tool's value is its text (code mode's call_tool gives structuredContent or text).
  const result = tool.outputSchema ? bounded(typeOf(tool.outputSchema, 0, true)) : 'string';
  const doc = firstLine(tool.description ?? tool.title ?? '', DOC_CHARS);
  const comment = doc === '' ? '' : `/** ${doc} */\n`;
  return `${comment}declare function call_tool(name: ${JSON.stringify(tool.name)}, args: ${args}): Promise<${result}>;`;
}

function bounded(type: string): string {
  return type.length <= MAX_TYPE_CHARS ? type : 'Record<string, unknown>';
}

function typeOf(value: unknown, depth: number, topLevel = false): string {
  if (value === true || value === undefined) return 'unknown';
  if (value === false) return 'never';
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'unknown';
  if (depth > MAX_DEPTH) return 'unknown';
  const schema = value as Schema;
  if ('const' in schema) return literal(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.length === 0 ? 'never' : union(schema.enum.slice(0, 50).map(literal));
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key];
    if (Array.isArray(options) && options.length > 0) return union(options.slice(0, 20).map((option) => typeOf(option, depth + 1)));
  }
  if (Array.isArray(schema.allOf) && schema.allOf.length > 0) {
    return schema.allOf.slice(0, 20).map((part) => wrap(typeOf(part, depth + 1))).join(' & ');
  }
  const type = schema.type;
  if (Array.isArray(type)) return union(type.filter((t): t is string => typeof t === 'string').map((t) => typeOf({ ...schema, type: t }, depth)));
  switch (type) {
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array':
      return arrayType(schema, depth);
    case 'object':
      return objectType(schema, depth, topLevel);
    default:
      // No type: an object when it names properties, else anything.
      return schema.properties !== undefined ? objectType(schema, depth, topLevel) : 'unknown';
  }
}

function arrayType(schema: Schema, depth: number): string {
  if (Array.isArray(schema.prefixItems)) return `[${schema.prefixItems.slice(0, 20).map((item) => typeOf(item, depth + 1)).join(', ')}]`;
  return `${wrap(typeOf(schema.items, depth + 1))}[]`;
}

function objectType(schema: Schema, depth: number, topLevel: boolean): string {
  const properties = isObject(schema.properties) ? Object.entries(schema.properties).slice(0, 100) : [];
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((name): name is string => typeof name === 'string') : []);
  const fields = properties.map(([name, property]) => {
    const key = IDENTIFIER.test(name) ? name : JSON.stringify(name);
    const doc = isObject(property) && typeof property.description === 'string' ? firstLine(property.description, FIELD_DOC_CHARS) : '';
    // Descriptions of top-level parameters say what to pass; nested ones would cost more than they help.
    const comment = topLevel && doc !== '' ? `/** ${doc} */ ` : '';
    return `${comment}${key}${required.has(name) ? '' : '?'}: ${typeOf(property, depth + 1)};`;
  });
  const extra = schema.additionalProperties;
  if (fields.length === 0) {
    if (isObject(extra)) return `Record<string, ${typeOf(extra, depth + 1)}>`;
    return extra === false ? '{}' : 'Record<string, unknown>';
  }
  if (isObject(extra)) fields.push(`[key: string]: unknown;`);
  return `{ ${fields.join(' ')} }`;
}

function union(types: string[]): string {
  const unique = [...new Set(types)];
  return unique.length === 0 ? 'never' : unique.join(' | ');
}

/** Parenthesised when it is a union or intersection, so `[]` and `&` bind to the whole. */
function wrap(type: string): string {
  return /[|&]/.test(type) && !/^[{[]/.test(type) ? `(${type})` : type;
}

function literal(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.length > 100 ? value.slice(0, 100) : value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return 'unknown';
}

function isObject(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The first sentence of a text, on one line, without anything that would end a doc comment. */
function firstLine(text: string, limit: number): string {
  const flat = text.replace(/\*\//g, '* /').replace(/\s+/g, ' ').trim();
  const first = flat.split(/(?<=[.!?])\s/u)[0] ?? '';
  return first.length <= limit ? first : `${first.slice(0, limit - 1).trimEnd()}…`;
}
