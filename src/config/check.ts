import YAML from 'yaml';
import type { z } from 'zod';
import { configInput, configSchema, ConfigError, type Config } from './config.js';

export const MASK = '***';

/** Settings whose value is a secret wherever they appear (admin key, upstream LLM key, tokens, passwords). */
const SECRET_NAME = /(^|[a-z_-])(key|secret|token|password|passwd)$/i;

export interface ConfigCheck {
  /** The effective configuration, secrets masked. */
  config: Record<string, unknown>;
  /** Keys the schema does not know: ignored by toolrouter, most likely typos. */
  unknown: string[];
}

export interface ConfigInspection {
  /** The effective configuration; undefined when there are problems. */
  config: Config | undefined;
  /** Every problem, `path: message`, one per entry. */
  problems: string[];
  /** Keys the schema does not know (reported whether or not there are problems as well). */
  unknown: string[];
}

/** The configuration the way `serve` loads it (file, then environment), with its problems and unknown keys. */
export function inspectConfig(env: NodeJS.ProcessEnv = process.env): ConfigInspection {
  let input: Record<string, unknown>;
  try {
    input = configInput(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { config: undefined, problems: error.problems, unknown: [] };
  }
  const unknown = unknownSettings(input);
  const parsed = configSchema.safeParse(input);
  if (parsed.success) return { config: parsed.data, problems: [], unknown };
  return { config: undefined, problems: parsed.error.issues.map((issue) => `${issue.path.join('.') || 'config'}: ${issue.message}`), unknown };
}

/**
 * Validates the configuration the way `serve` would load it (file, then environment) and returns it with secrets
 * masked. Throws ConfigError listing every problem.
 */
export function checkConfig(env: NodeJS.ProcessEnv = process.env): ConfigCheck {
  const { config, problems, unknown } = inspectConfig(env);
  if (!config) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`, problems);
  return { config: maskSecrets(config), unknown };
}

/**
 * A copy safe to print: the admin key, the upstream LLM key, passwords in URLs, every env value of a stdio MCP server
 * and every header value of an HTTP one (they carry tokens), and any other setting named like a key or secret.
 */
export function maskSecrets(config: Config): Record<string, unknown> {
  const copy = structuredClone(config) as unknown as Record<string, unknown>;
  const servers = (copy.mcp as { servers?: Record<string, Record<string, unknown>> } | undefined)?.servers ?? {};
  for (const server of Object.values(servers)) {
    for (const field of ['env', 'headers']) {
      const values = server[field] as Record<string, unknown> | undefined;
      if (values) for (const name of Object.keys(values)) values[name] = MASK;
    }
  }
  return maskValues(copy) as Record<string, unknown>;
}

function maskValues(value: unknown, name = ''): unknown {
  if (typeof value === 'string') {
    if (SECRET_NAME.test(name) && value !== MASK) return MASK;
    return maskUrlPassword(value);
  }
  if (Array.isArray(value)) return value.map((item) => maskValues(item));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, maskValues(item, key)]));
  }
  return value;
}

/** `redis://user:secret@host` → `redis://user:***@host`; strings that are not URLs with a password are left alone. */
function maskUrlPassword(value: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/@\s]*:[^/@\s]*@/i.test(value)) return value;
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/:@\s]*):[^/@\s]*@/i, `$1:${MASK}@`);
}

/**
 * Paths of keys in the input that the schema would drop without a word: keys of plain (stripping) objects that the
 * schema does not name. Strict objects reject unknown keys themselves; loose ones (tool definitions) keep them;
 * records take any key. Read off the schema, not the parse result, so a config with errors is checked too.
 */
export function unknownSettings(input: unknown, schema: z.ZodType = configSchema, path: string[] = []): string[] {
  const def = (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;
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

/** The parts of zod's schema definitions that unknownSettings walks (wrappers: default, prefault, optional...). */
interface SchemaDef {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
  valueType?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function formatConfig(config: Record<string, unknown>, format: 'yaml' | 'json'): string {
  return format === 'json' ? `${JSON.stringify(config, null, 2)}\n` : YAML.stringify(config);
}
