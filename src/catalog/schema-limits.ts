import { compileLinear } from './linear-regex.js';

/**
 * Bounds on a tool's JSON Schema, checked before the schema is handed to ajv: ajv's meta-schema check compares `enum`
 * (and `required`, `type`) entries pairwise for uniqueness, and generated validators recurse with the schema's depth, so
 * an unbounded schema from a static PUT or an upstream's `tools/list` could hold the event loop for minutes.
 */
export interface SchemaLimits {
  /** Deepest nesting of arrays and objects. */
  depth: number;
  /** Largest schema as JSON text. */
  bytes: number;
  /** Most entries of one array (`enum`, `required`, `anyOf`...). */
  arrayItems: number;
  /** Most keys of one object (`properties`, `$defs`...). */
  objectKeys: number;
  /** Longest `pattern` or `patternProperties` key. */
  patternLength: number;
}

export const DEFAULT_SCHEMA_LIMITS: SchemaLimits = { depth: 64, bytes: 256 * 1024, arrayItems: 1_000, objectKeys: 1_000, patternLength: 1_000 };

/** Keywords whose values are data, not schemas: a `pattern` key inside them is not a regular expression. */
const DATA_KEYWORDS = new Set(['enum', 'const', 'default', 'examples', 'example']);

/**
 * Why a schema is over a limit or carries a regular expression RE2 cannot run, or undefined when it is fine. One
 * iterative walk that stops at the first problem, so the cost is bounded by the limits, not by the input.
 */
export function schemaLimitProblem(schema: unknown, limits: SchemaLimits): string | undefined {
  const stack: { value: unknown; depth: number; data: boolean }[] = [{ value: schema, depth: 1, data: false }];
  let nodes = 0;
  // Bytes are measured after the walk has bounded depth and width, so JSON.stringify cannot overflow the stack.
  const maxNodes = limits.bytes;
  while (stack.length > 0) {
    const { value, depth, data } = stack.pop()!;
    if (++nodes > maxNodes) return `is larger than ${limits.bytes} bytes`;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > limits.depth) return `nests deeper than ${limits.depth} levels`;
    if (Array.isArray(value)) {
      if (value.length > limits.arrayItems) return `has an array of ${value.length} entries (at most ${limits.arrayItems})`;
      for (const item of value) stack.push({ value: item, depth: depth + 1, data });
      continue;
    }
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length > limits.objectKeys) return `has an object of ${entries.length} keys (at most ${limits.objectKeys})`;
    for (const [key, child] of entries) {
      if (!data && key === 'pattern' && typeof child === 'string') {
        const problem = patternProblem(child, limits.patternLength);
        if (problem) return problem;
      }
      if (!data && key === 'patternProperties' && typeof child === 'object' && child !== null && !Array.isArray(child)) {
        for (const pattern of Object.keys(child)) {
          const problem = patternProblem(pattern, limits.patternLength);
          if (problem) return problem;
        }
      }
      stack.push({ value: child, depth: depth + 1, data: data || DATA_KEYWORDS.has(key) });
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > limits.bytes) return `is ${bytes} bytes as JSON (at most ${limits.bytes})`;
  return undefined;
}

/** Arguments are checked with RE2 (linear time), so a pattern RE2 cannot compile (lookaround, backreferences) is refused. */
function patternProblem(pattern: string, maxLength: number): string | undefined {
  if (pattern.length > maxLength) return `has a pattern of ${pattern.length} characters (at most ${maxLength})`;
  try {
    compileLinear(pattern);
    return undefined;
  } catch (error) {
    return `has a pattern ${JSON.stringify(pattern.slice(0, 100))} that is invalid or not supported (RE2 syntax, no lookaround or backreferences): ${(error as Error).message}`;
  }
}
