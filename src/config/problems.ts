/**
 * One rule for the configuration: every setting toolrouter does not know is an error, at any depth, named with the
 * closest setting it does know; and a value of the wrong type is named with the type it should have and the value
 * given. Generic over the schema (a walk over its shape and over zod's issues), so no section is special.
 */
import type { z } from 'zod';

/** Where a misspelling has a likelier cause than a typo, what else to say (keyed by the unknown key as written). */
const HINTS: Record<string, string> = {
  // The key of MCP client config files (Claude Desktop, Cursor, .mcp.json): those files are imported, not pasted in.
  mcpServers: 'or import the file with mcp.import / --mcp-config',
};

/** The parts of zod's schema definitions walked here (wrappers: default, prefault, optional, pipe...). */
interface SchemaDef {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
  valueType?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  options?: z.ZodType[];
}

const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;

/**
 * Paths of keys in the input the schema does not name, in plain (stripping) objects, which would drop them without a
 * word. Strict objects reject unknown keys themselves (zod's unrecognized_keys, formatted below); loose ones (tool
 * definitions) keep them; records take any key. Read off the schema, not the parse result, so a config with other
 * errors is checked too.
 */
export function unknownSettings(input: unknown, schema: z.ZodType, path: string[] = []): string[] {
  const def = defOf(schema);
  if (def.innerType) return unknownSettings(input, def.innerType, path);
  if (def.type === 'pipe' && def.in) return unknownSettings(input, def.in, path);
  if (def.type === 'array' && def.element && Array.isArray(input)) {
    return input.flatMap((item, index) => unknownSettings(item, def.element!, [...path, String(index)]));
  }
  if (!isObject(input)) return [];
  if (def.type === 'record' && def.valueType) {
    return Object.entries(input).flatMap(([key, value]) => unknownSettings(value, def.valueType!, [...path, key]));
  }
  if (def.type !== 'object' || !def.shape || def.catchall) return [];
  const found: string[] = [];
  for (const [key, value] of Object.entries(input)) {
    const field = def.shape[key];
    if (field) found.push(...unknownSettings(value, field, [...path, key]));
    else found.push([...path, key].join('.'));
  }
  return found;
}

/** Every setting path the schema names (records' entries as their keys in `input`), for suggestions. */
function knownPaths(schema: z.ZodType, input: unknown, path: string[] = [], out: string[] = [], depth = 0): string[] {
  if (depth > 8) return out;
  const def = defOf(schema);
  if (def.innerType) return knownPaths(def.innerType, input, path, out, depth);
  if (def.type === 'pipe' && def.in) return knownPaths(def.in, input, path, out, depth);
  if (def.type === 'record' && def.valueType && isObject(input)) {
    for (const [key, value] of Object.entries(input)) knownPaths(def.valueType, value, [...path, key], out, depth + 1);
  }
  if (def.type === 'union' && def.options) for (const option of def.options) knownPaths(option, input, path, out, depth + 1);
  if (def.type === 'object' && def.shape) {
    for (const [key, field] of Object.entries(def.shape)) {
      out.push([...path, key].join('.'));
      knownPaths(field, isObject(input) ? input[key] : undefined, [...path, key], out, depth + 1);
    }
  }
  return out;
}

/** "`x.y`: unknown setting; did you mean `x.z`?" with the closest known path, if any is close. */
export function unknownSettingProblem(unknownPath: string, schema: z.ZodType, input: unknown): string {
  const key = unknownPath.split('.').at(-1)!;
  const parent = unknownPath.split('.').slice(0, -1).join('.');
  const known = [...new Set(knownPaths(schema, input))];
  const norm = (text: string) => text.toLowerCase().replace(/[^a-z0-9]/g, '');
  const wanted = norm(unknownPath);
  let best: { path: string; distance: number } | undefined;
  for (const candidate of known) {
    const candidateParent = candidate.split('.').slice(0, -1).join('.');
    // Whole paths compared, so `mcpServers` finds `mcp.servers`; a sibling wins a tie.
    const distance = levenshtein(wanted, norm(candidate)) - (candidateParent === parent ? 0.5 : 0);
    if (!best || distance < best.distance) best = { path: candidate, distance };
  }
  const close = best !== undefined && best.distance <= Math.max(2, Math.floor(wanted.length / 3));
  const hint = HINTS[key];
  const suggestion = close ? `; did you mean \`${best!.path}\`${hint ? `, ${hint}` : ''}?` : hint ? `; ${hint}` : '';
  return `${unknownPath}: unknown setting${suggestion}`;
}

/** zod's issues as `path: message`, with types and values spelled out and unknown keys named with a suggestion. */
export function issueProblems(issues: readonly z.core.$ZodIssue[], schema: z.ZodType, input: unknown): string[] {
  return issues.flatMap((issue) => {
    const path = issue.path.map(String).join('.');
    const where = path || 'config';
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => unknownSettingProblem(path ? `${path}.${key}` : key, schema, input));
    }
    const given = valueAt(input, issue.path);
    if (issue.code === 'invalid_type') return [`${where}: must be ${typeName(issue.expected)}, got ${describe(given, issue.path)}`];
    if (issue.code === 'invalid_union' && issue.message === 'Invalid input') {
      const expected = issue.errors.flatMap((branch) => branch.filter((inner) => inner.code === 'invalid_type' && inner.path.length === 0).map((inner) => typeName((inner as { expected: string }).expected)));
      if (expected.length === issue.errors.length) return [`${where}: must be ${expected.join(' or ')}, got ${describe(given, issue.path)}`];
    }
    return [`${where}: ${issue.message}`];
  });
}

function typeName(expected: string): string {
  const names: Record<string, string> = { number: 'a number', int: 'an integer', string: 'a string', boolean: 'true or false', object: 'a mapping', array: 'a list' };
  return names[expected] ?? expected;
}

/** Settings whose value is a secret (as src/config/check.ts masks them): their values are never repeated in a message. */
const SECRET = /(^|[a-z_-])(key|secret|token|password|passwd)$/i;

function describe(value: unknown, path: readonly PropertyKey[] = []): string {
  if (value === undefined) return 'nothing';
  const secret = path.some((key) => key === 'env' || key === 'headers') || SECRET.test(String(path.at(-1) ?? ''));
  if (secret) return Array.isArray(value) ? 'a list' : value === null ? 'null (empty)' : typeof value === 'object' ? 'a mapping' : `a ${typeof value}`;
  if (value === null) return 'null (empty)';
  const kind = Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'a mapping' : `a ${typeof value}`;
  const text = JSON.stringify(value);
  return text.length > 60 ? kind : `${text} (${kind})`;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (!isObject(value) && !Array.isArray(value)) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/** Edit distance of two short setting paths (a dozen lines; not worth a runtime dependency). */
function levenshtein(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
