import { createRequire } from 'node:module';
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvDraft04 from 'ajv-draft-04';
import ajvFormats from 'ajv-formats';
import { ajvLinearRegExp } from './linear-regex.js';

/**
 * Real MCP servers publish input schemas in several JSON Schema dialects: draft-07 from most generators, 2020-12 as
 * the MCP specification now prefers, and draft-04 from older tooling (`exclusiveMinimum: true`). A schema is valid
 * when it is valid in any of them, its declared `$schema` tried first.
 */
// ajv-draft-04 is CommonJS whose class is both module.exports and .default; NodeNext types see only the latter.
const AjvDraft04 = ajvDraft04.default;
const require = createRequire(import.meta.url);
const addFormats = ajvFormats.default;

const dialects = [
  { id: 'draft-07', ajv: new Ajv({ strict: false, allErrors: true }) },
  { id: '2020-12', ajv: new Ajv2020({ strict: false, allErrors: true }) },
  { id: 'draft-04', ajv: linearDraft04() },
];

/**
 * Draft-04's meta-schema says `enum` entries are unique, which ajv checks by comparing every pair (items of any type):
 * a 40,000-entry enum took 95 s. The later drafts dropped that rule; here draft-04 drops it too, so checking a schema
 * is linear in its size (a repeated enum value is harmless).
 */
function linearDraft04(options: ConstructorParameters<typeof AjvDraft04>[0] = { strict: false, allErrors: true }): InstanceType<typeof AjvDraft04> {
  const meta = structuredClone(require('ajv-draft-04/dist/refs/json-schema-draft-04.json') as { id: string; properties: { enum: Record<string, unknown> } });
  delete meta.properties.enum.uniqueItems;
  const ajv = new AjvDraft04({ ...options, meta: false });
  ajv.addMetaSchema(meta, meta.id, false);
  return ajv;
}

/**
 * Checks a schema against the dialects' meta-schemas (cheap: no code generation, so a 100k-tool catalog loads fast)
 * and returns why it is invalid, or undefined when it is valid.
 */
export function schemaProblem(schema: Record<string, unknown>): string | undefined {
  const declared = typeof schema.$schema === 'string' ? schema.$schema : '';
  const ordered = [...dialects].sort((a, b) => Number(declared.includes(b.id)) - Number(declared.includes(a.id)));
  let firstProblem: string | undefined;
  for (const { ajv } of ordered) {
    try {
      if (ajv.validateSchema(schema) === true) return undefined;
      firstProblem ??= ajv.errorsText(ajv.errors, { dataVar: 'schema' });
    } catch (error) {
      // An unknown $schema URI throws instead of returning false.
      firstProblem ??= (error as Error).message;
    }
  }
  return firstProblem ?? 'not a valid JSON Schema';
}

/** A compiled argument validator: the list of problems (`path: message`), empty when the value is valid. */
export type SchemaValidator = (value: unknown) => string[];

/**
 * Separate instances for validating data: they know the common string formats (email, uri, date-time, ...), which the
 * meta-schema checks above have no use for, and never add compiled schemas to their registry, so two tools may share an
 * `$id` and a re-listed catalog does not pile up entries.
 */
const compilerOptions = {
  strict: false,
  allErrors: true,
  addUsedSchema: false,
  logger: false,
  // `pattern` runs on arguments any caller sends: RE2 matches in linear time, where a backtracking RegExp on
  // "^(a+)+$" freezes the event loop for every tenant. Patterns RE2 cannot run are refused when the tool registers.
  code: { regExp: ajvLinearRegExp },
} as const;
const compilers = [
  { id: 'draft-07', ajv: withFormats(new Ajv(compilerOptions)) },
  { id: '2020-12', ajv: withFormats(new Ajv2020(compilerOptions)) },
  { id: 'draft-04', ajv: withFormats(linearDraft04(compilerOptions)) },
];

const COMPILED_CACHE_SIZE = 2_000;
/** Keyed by the schema's JSON text: a re-listed tool with the same schema reuses its validator. Oldest evicted first. */
const compiled = new Map<string, SchemaValidator>();

/**
 * Compiles a schema for validating values, in the first dialect (declared `$schema` first, as `schemaProblem` orders
 * them) whose meta-schema accepts it. Cached by schema text; code generation costs about a millisecond per schema, so
 * callers compile lazily, when a tool is first called.
 */
export function compileSchema(schema: Record<string, unknown>): SchemaValidator {
  const key = JSON.stringify(schema);
  const cached = compiled.get(key);
  if (cached) {
    // Refresh its position so frequently called tools stay cached.
    compiled.delete(key);
    compiled.set(key, cached);
    return cached;
  }
  const declared = typeof schema.$schema === 'string' ? schema.$schema : '';
  const ordered = [...compilers].sort((a, b) => Number(declared.includes(b.id)) - Number(declared.includes(a.id)));
  let lastError: unknown;
  for (const { ajv } of ordered) {
    try {
      if (ajv.validateSchema(schema) !== true) continue;
      const validate = ajv.compile(schema);
      // compile() caches by object identity; the string-keyed cache above replaces that, so drop ajv's entry.
      ajv.removeSchema(schema);
      const validator: SchemaValidator = (value) =>
        validate(value) ? [] : (validate.errors ?? []).map((error) => `${error.instancePath || '(root)'}: ${describeError(error)}`);
      compiled.set(key, validator);
      if (compiled.size > COMPILED_CACHE_SIZE) compiled.delete(compiled.keys().next().value!);
      return validator;
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`cannot compile schema: ${lastError instanceof Error ? lastError.message : (schemaProblem(schema) ?? 'not a valid JSON Schema')}`);
}

function describeError(error: { keyword: string; message?: string; params: Record<string, unknown> }): string {
  const message = error.message ?? error.keyword;
  // Ajv's messages leave out the names that make them actionable for a model fixing its call.
  if (error.keyword === 'additionalProperties') return `${message} "${String(error.params.additionalProperty)}"`;
  if (error.keyword === 'enum' && Array.isArray(error.params.allowedValues)) {
    return `${message}: ${error.params.allowedValues.map((value) => JSON.stringify(value)).join(', ')}`;
  }
  return message;
}

function withFormats<T extends Parameters<typeof addFormats>[0]>(ajv: T): T {
  addFormats(ajv);
  return ajv;
}
