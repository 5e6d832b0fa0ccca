import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';

/** One policy file as read. */
export interface PolicySource {
  file: string;
  text: string;
}

/** A validated policy set: each policy's text and annotations under its id (`@id`, else `policy<N>` over all files). */
export interface CompiledPolicies {
  policies: Record<string, string>;
  annotations: Record<string, Record<string, string>>;
  /** SHA-256 of the sources: equal texts, equal versions (memos and instances compare it). */
  version: string;
  sources: PolicySource[];
}

/** Policies that cannot be used; each problem names the file, the line and Cedar's message. */
export class PolicyLoadError extends Error {
  override readonly name = 'PolicyLoadError';
  constructor(readonly problems: string[]) {
    super(`invalid policies: ${problems.join('; ')}`);
  }
}

/** Bounds a policy file, so a wrong path (a log, a dump) is refused rather than parsed. */
const MAX_FILE_BYTES = 4 * 1024 * 1024;

export function readPolicyFiles(files: readonly string[]): PolicySource[] {
  const problems: string[] = [];
  const sources: PolicySource[] = [];
  for (const file of files) {
    try {
      const buffer = readFileSync(file);
      if (buffer.length > MAX_FILE_BYTES) problems.push(`${file}: larger than ${MAX_FILE_BYTES} bytes`);
      else sources.push({ file, text: buffer.toString('utf8') });
    } catch (error) {
      problems.push(`${file}: cannot read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  }
  if (problems.length > 0) throw new PolicyLoadError(problems);
  return sources;
}

/**
 * Parses and validates every file against the schema, each on its own so Cedar's source locations are offsets into
 * that file. `context.arguments` is open (a call's arguments have no schema): Cedar's complaints about its attributes
 * are not problems, everything else is.
 */
export function compilePolicies(sources: readonly PolicySource[], schema: string): CompiledPolicies {
  const problems: string[] = [];
  const policies: Record<string, string> = {};
  const annotations: Record<string, Record<string, string>> = {};
  const where = new Map<string, string>();
  let index = 0;
  for (const { file, text } of sources) {
    const parsed = cedar.checkParsePolicySet({ staticPolicies: text });
    if (parsed.type === 'failure') {
      problems.push(...parsed.errors.map((error) => describe(file, text, error)));
      continue;
    }
    const validated = cedar.validate({ schema, policies: { staticPolicies: text } });
    if (validated.type === 'failure') {
      problems.push(...validated.errors.map((error) => describe(file, text, error)));
      continue;
    }
    const errors = validated.validationErrors.filter((error) => !/attribute `arguments\./.test(error.error.message));
    if (errors.length > 0) {
      problems.push(...errors.map((error) => describe(file, text, error.error)));
      continue;
    }
    const parts = cedar.policySetTextToParts(text);
    if (parts.type === 'failure') {
      problems.push(...parts.errors.map((error) => describe(file, text, error)));
      continue;
    }
    if (parts.policy_templates.length > 0) problems.push(`${file}: policy templates are not supported (write static policies)`);
    for (const part of parts.policies) {
      const json = cedar.policyToJson(part);
      const notes = json.type === 'success' ? (json.json.annotations ?? {}) : {};
      const id = notes.id ?? `policy${index}`;
      index++;
      const line = lineOf(text, Buffer.byteLength(text.slice(0, Math.max(0, text.indexOf(part)))));
      if (Object.hasOwn(policies, id)) {
        problems.push(`${file}:${line}: policy id "${id}" is already used (${where.get(id)})`);
        continue;
      }
      if (notes.confirm !== undefined && json.type === 'success' && json.json.effect !== 'permit') {
        problems.push(`${file}:${line}: @confirm applies to permit policies only ("${id}" is a forbid)`);
      }
      policies[id] = part;
      annotations[id] = notes;
      where.set(id, `${file}:${line}`);
    }
  }
  if (problems.length > 0) throw new PolicyLoadError(problems);
  const version = createHash('sha256');
  for (const { file, text } of sources) version.update(`${file}\u0000${text}\u0000`);
  return { policies, annotations, version: version.digest('hex').slice(0, 16), sources: [...sources] };
}

/** `file:line: message (label)`: Cedar's source locations are byte offsets into the text it was given. */
function describe(file: string, text: string, error: cedar.DetailedError): string {
  const location = error.sourceLocations?.[0];
  const line = location ? `:${lineOf(text, location.start)}` : '';
  const label = location?.label ? ` (${location.label})` : '';
  const help = error.help ? `; ${error.help}` : '';
  return `${file}${line}: ${error.message}${label}${help}`;
}

function lineOf(text: string, byteOffset: number): number {
  const before = Buffer.from(text, 'utf8').subarray(0, byteOffset).toString('utf8');
  return before.split('\n').length;
}
