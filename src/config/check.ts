import path from 'node:path';
import YAML from 'yaml';
import { ClientConfigError, importClientConfigs, type ImportedServers } from '../mcp/upstream/client-config.js';
import { PolicyLoadError } from '../policy/load.js';
import { PolicyService } from '../policy/service.js';
import { configInput, ConfigError, validateConfig, type Config } from './config.js';

export const MASK = '***';

/** Settings whose value is a secret wherever they appear (admin key, upstream LLM key, tokens, passwords). */
const SECRET_NAME = /(^|[a-z_-])(key|secret|token|password|passwd)$/i;

export interface ConfigCheck {
  /** The effective configuration, secrets masked. */
  config: Record<string, unknown>;
}

export interface ConfigInspection {
  /** The effective configuration; undefined when there are problems. */
  config: Config | undefined;
  /** Every problem, `path: message`, one per entry; unknown settings among them. */
  problems: string[];
  /** Entries of mcp.import files that `serve` will leave out (it starts without them), with the reason. */
  leftOut: ImportedServers['skipped'];
}

/** The configuration the way `serve` loads it (file, then environment), with its problems. */
export function inspectConfig(env: NodeJS.ProcessEnv = process.env): ConfigInspection {
  let input: Record<string, unknown>;
  try {
    input = configInput(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { config: undefined, problems: error.problems, leftOut: [] };
  }
  const validated = validateConfig(input);
  if (!validated.config) return { ...validated, leftOut: [] };
  // `serve` reads the mcp.import files at start and stops when one cannot be used; the check reads them the same way.
  // Each file alone first, so every unusable file is named; then all together, as serve reads them (a name taken by
  // an earlier file is left out).
  const files = validated.config.mcp.import.map((file) => path.resolve(file));
  const problems: string[] = [];
  for (const file of files) {
    try {
      importClientConfigs([file], env);
    } catch (error) {
      if (!(error instanceof ClientConfigError)) throw error;
      problems.push(`mcp.import: ${error.message}`);
    }
  }
  // Policies are validated against toolrouter's Cedar schema as serve loads them: an invalid one refuses the start.
  try {
    PolicyService.check(validated.config.policy);
  } catch (error) {
    if (!(error instanceof PolicyLoadError)) throw error;
    problems.push(...error.problems.map((problem) => `policy.files: ${problem}`));
  }
  if (problems.length > 0) return { config: undefined, problems, leftOut: [] };
  const { skipped } = importClientConfigs(files, env, Object.keys(validated.config.mcp.servers));
  return { config: validated.config, problems, leftOut: skipped };
}

/**
 * Validates the configuration the way `serve` would load it (file, then environment) and returns it with secrets
 * masked. Throws ConfigError listing every problem.
 */
export function checkConfig(env: NodeJS.ProcessEnv = process.env): ConfigCheck {
  const { config, problems } = inspectConfig(env);
  if (!config) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`, problems);
  return { config: maskSecrets(config) };
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

export function formatConfig(config: Record<string, unknown>, format: 'yaml' | 'json'): string {
  return format === 'json' ? `${JSON.stringify(config, null, 2)}\n` : YAML.stringify(config);
}
