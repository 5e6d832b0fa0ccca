import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvDraft04 from 'ajv-draft-04';

/**
 * Real MCP servers publish input schemas in several JSON Schema dialects: draft-07 from most generators, 2020-12 as
 * the MCP specification now prefers, and draft-04 from older tooling (`exclusiveMinimum: true`). A schema is valid
 * when it is valid in any of them, its declared `$schema` tried first.
 */
// ajv-draft-04 is CommonJS whose class is both module.exports and .default; NodeNext types see only the latter.
const AjvDraft04 = ajvDraft04.default;

const dialects = [
  { id: 'draft-07', ajv: new Ajv({ strict: false, allErrors: true }) },
  { id: '2020-12', ajv: new Ajv2020({ strict: false, allErrors: true }) },
  { id: 'draft-04', ajv: new AjvDraft04({ strict: false, allErrors: true }) },
];

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
