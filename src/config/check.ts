import YAML from 'yaml';
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

/**
 * Validates the configuration the way `serve` would load it (file, then environment) and returns it with secrets
 * masked, for `toolrouter config check`. Throws ConfigError listing every problem.
 */
export function checkConfig(env: NodeJS.ProcessEnv = process.env): ConfigCheck {
  const input = configInput(env);
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'config'}: ${issue.message}`);
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`, problems);
  }
  return { config: maskSecrets(parsed.data), unknown: unknownKeys(input, parsed.data as unknown as Record<string, unknown>) };
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

/** Paths of keys present in the input that validation dropped (records and tool definitions keep every key). */
export function unknownKeys(input: unknown, parsed: unknown, path: string[] = []): string[] {
  if (!isObject(input) || !isObject(parsed)) return [];
  const found: string[] = [];
  for (const [key, value] of Object.entries(input)) {
    if (!(key in parsed)) found.push([...path, key].join('.'));
    else found.push(...unknownKeys(value, parsed[key], [...path, key]));
  }
  return found;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function formatConfig(config: Record<string, unknown>, format: 'yaml' | 'json'): string {
  return format === 'json' ? `${JSON.stringify(config, null, 2)}\n` : YAML.stringify(config);
}
