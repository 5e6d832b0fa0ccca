/**
 * MCP client config files as their clients write them, read into upstream servers: Claude Desktop
 * (`claude_desktop_config.json`: `mcpServers`, stdio `command/args/env`), Claude Code (`.mcp.json`: `type: stdio | http |
 * sse`, `url`, `headers`), Cursor (`mcp.json`: `url` for remote servers) and VS Code (`.vscode/mcp.json`: `servers`,
 * `type`, `inputs`). Strings expand `${VAR}` and `${VAR:-default}` from the environment (VS Code's `${env:VAR}` too).
 * An entry that cannot be used is reported by name with the reason; the rest load.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseJsonc, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { mcpServerSchema, SERVER_NAME, SERVER_NAME_MESSAGE } from '../settings.js';
import type { UpstreamServerConfig } from './index.js';

export interface ImportedServers {
  servers: Record<string, UpstreamServerConfig>;
  /** Entries left out, `<file>: server "<name>": <reason>`; `disabled: true` entries are among them. */
  skipped: { file: string; server: string; reason: string; disabled?: true }[];
}

/** A whole file could not be used (missing, not JSON, no servers object): the caller asked for it, so this stops start-up. */
export class ClientConfigError extends Error {
  override readonly name = 'ClientConfigError';
}

/** Largest client config file read; they are a few KB. */
const MAX_FILE_BYTES = 1_000_000;

/** Reads every file in order; a name already taken by an earlier file (or by `taken`) is skipped with the reason. */
export function importClientConfigs(files: readonly string[], env: NodeJS.ProcessEnv = process.env, taken: readonly string[] = []): ImportedServers {
  const result: ImportedServers = { servers: {}, skipped: [] };
  const owners = new Map<string, string>(taken.map((name) => [name, 'mcp.servers']));
  for (const file of files) {
    const one = readClientConfig(file, env);
    result.skipped.push(...one.skipped);
    for (const [name, config] of Object.entries(one.servers)) {
      const owner = owners.get(name);
      if (owner !== undefined) {
        result.skipped.push({ file, server: name, reason: `the name is already used by ${owner}` });
        continue;
      }
      owners.set(name, file);
      result.servers[name] = config;
    }
  }
  return result;
}

export function readClientConfig(file: string, env: NodeJS.ProcessEnv = process.env): ImportedServers {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ClientConfigError(`cannot read MCP config ${file}: ${(error as Error).message}`);
  }
  if (text.length > MAX_FILE_BYTES) throw new ClientConfigError(`MCP config ${file} is larger than ${MAX_FILE_BYTES} bytes`);
  return parseClientConfig(text, file, env);
}

/** `file` names the entries in reports and anchors VS Code's `${workspaceFolder}`. */
export function parseClientConfig(text: string, file: string, env: NodeJS.ProcessEnv = process.env): ImportedServers {
  // VS Code's files are JSONC (comments, trailing commas); the others are plain JSON, which JSONC accepts too.
  const errors: ParseError[] = [];
  const document: unknown = parseJsonc(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length > 0) {
    const first = errors[0]!;
    const line = text.slice(0, first.offset).split('\n').length;
    throw new ClientConfigError(`MCP config ${file} is not valid JSON: ${printParseErrorCode(first.error)} at line ${line}`);
  }
  const entries = serversOf(document);
  if (!entries) {
    throw new ClientConfigError(`MCP config ${file} has no servers: expected "mcpServers" (Claude Desktop, Claude Code, Cursor) or "servers" (VS Code) at the top level`);
  }
  const result: ImportedServers = { servers: {}, skipped: [] };
  const context: Expansion = { env, workspaceFolder: workspaceFolderOf(file) };
  for (const [name, entry] of Object.entries(entries)) {
    const converted = convertEntry(name, entry, context);
    if ('reason' in converted) result.skipped.push({ file, server: name, reason: converted.reason, ...(converted.disabled ? { disabled: true as const } : {}) });
    else result.servers[name] = converted.config;
  }
  return result;
}

function serversOf(document: unknown): Record<string, unknown> | undefined {
  if (!isObject(document)) return undefined;
  for (const candidate of [document.mcpServers, document.servers, isObject(document.mcp) ? document.mcp.servers : undefined]) {
    if (isObject(candidate)) return candidate;
  }
  return undefined;
}

interface Expansion {
  env: NodeJS.ProcessEnv;
  workspaceFolder: string;
}

/** Keys of a client entry toolrouter uses (`auth`: toolrouter's own, for OAuth servers); clients' own settings (autoApprove, alwaysAllow, timeout, ...) are ignored. */
function convertEntry(name: string, entry: unknown, context: Expansion): { config: UpstreamServerConfig } | { reason: string; disabled?: boolean } {
  if (!SERVER_NAME.test(name)) return { reason: SERVER_NAME_MESSAGE };
  if (!isObject(entry)) return { reason: 'the entry is not an object' };
  if (entry.disabled === true) return { reason: 'disabled: true', disabled: true };
  if (entry.envFile !== undefined) return { reason: 'envFile is not read by toolrouter; put the variables in "env" (${VAR} expands from the environment)' };
  const picked: Record<string, unknown> = {};
  for (const key of ['type', 'transport', 'command', 'args', 'env', 'cwd', 'url', 'headers', 'auth', 'description']) {
    if (entry[key] !== undefined) picked[key] = entry[key];
  }
  if (picked.type === undefined && picked.transport === undefined && picked.url === undefined && picked.command === undefined) {
    return { reason: 'neither "command" (stdio) nor "url" (HTTP) is set' };
  }
  let expanded: unknown;
  try {
    expanded = expandStrings(picked, context);
  } catch (error) {
    return { reason: (error as Error).message };
  }
  if (isToolrouterItself(expanded as Record<string, unknown>)) {
    return { reason: 'this entry starts toolrouter itself (toolrouter stdio); it is the client\'s way in, not an upstream' };
  }
  const parsed = mcpServerSchema.safeParse(expanded);
  if (!parsed.success) {
    return { reason: parsed.error.issues.map((issue) => (issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message)).join('; ') };
  }
  const { disabled: _disabled, ...config } = parsed.data;
  return { config };
}

/**
 * The client's own entry for toolrouter, found when `--mcp-config` points at the file that also launches toolrouter
 * (Claude Desktop's config, a project's .mcp.json): importing it would make toolrouter start itself, without end.
 */
function isToolrouterItself(entry: Record<string, unknown>): boolean {
  if (typeof entry.command !== 'string') return false;
  const args = Array.isArray(entry.args) ? entry.args.filter((arg): arg is string => typeof arg === 'string') : [];
  return args.includes('stdio') && [entry.command, ...args].some((part) => /(^|[/\\])toolrouter(\.js)?$/.test(part));
}

function expandStrings(value: unknown, context: Expansion): unknown {
  if (typeof value === 'string') return expand(value, context);
  if (Array.isArray(value)) return value.map((item) => expandStrings(item, context));
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, expandStrings(item, context)]));
  return value;
}

const VARIABLE = /\$\{([^}]*)\}/g;

/**
 * `${VAR}`, `${VAR:-default}` (Claude Code), `${env:VAR}`, `${workspaceFolder}` and `${userHome}` (VS Code). A
 * variable that is not set and has no default, or a VS Code `${input:...}` (answered by a prompt in the editor, which a
 * server process cannot show), makes the entry unusable: throws with the reason.
 */
export function expand(text: string, context: Expansion): string {
  return text.replace(VARIABLE, (_match, body: string) => {
    if (body.startsWith('input:')) {
      throw new Error(`uses \${${body}}, a VS Code input prompted in the editor, which toolrouter cannot ask for; put the value in the environment and use \${VAR}`);
    }
    if (body === 'workspaceFolder') return context.workspaceFolder;
    if (body === 'userHome') return os.homedir();
    const defaultAt = body.indexOf(':-');
    const name = (defaultAt >= 0 ? body.slice(0, defaultAt) : body).replace(/^env:/, '');
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`\${${body}} is not a variable toolrouter can expand (\${VAR}, \${VAR:-default}, \${env:VAR})`);
    const value = context.env[name];
    if (value !== undefined && value !== '') return value;
    if (defaultAt >= 0) return body.slice(defaultAt + 2);
    if (value === '') return '';
    throw new Error(`environment variable ${name} is not set (use \${${name}:-default} for a default)`);
  });
}

/** VS Code's workspace: the folder holding `.vscode/`; for other files, the file's own folder. */
function workspaceFolderOf(file: string): string {
  const dir = path.dirname(path.resolve(file));
  return path.basename(dir) === '.vscode' ? path.dirname(dir) : dir;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
