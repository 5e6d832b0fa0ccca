import path from 'node:path';
import type { Logger } from 'pino';
import { inspectConfig } from '../config/check.js';
import type { Config } from '../config/config.js';
import { createLogger } from '../log.js';

/**
 * A configuration or start-up error: the CLI prints its message as one line and exits with code 2, without a stack
 * trace (the cause's stack follows with LOG_LEVEL=debug or trace).
 */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}

export interface StartOptions {
  /** Kept so scripts that pass `--strict-config` still run: unknown settings are always errors now. */
  strictConfig?: boolean;
  /** MCP client config files (`--mcp-config`), read after mcp.import; relative to the working directory. */
  mcpConfig?: string[];
}

/**
 * The configuration for `serve`, `stdio` and `worker`, with a logger at its level. Any problem, an unknown setting
 * included (a misspelled `mcp.serverz` would leave every upstream out), stops the start (exit code 2).
 */
export function startConfig(options: StartOptions, env: NodeJS.ProcessEnv = process.env): { config: Config; log: Logger } {
  const { config, problems } = inspectConfig(env);
  if (!config || problems.length > 0) throw new StartupError(`invalid configuration${source(env)}: ${problems.join('; ')}`);
  const log = createLogger(config.logLevel);
  const files = (options.mcpConfig ?? []).map((file) => path.resolve(file));
  if (files.length === 0) return { config, log };
  return { config: { ...config, mcp: { ...config.mcp, import: [...config.mcp.import, ...files] } }, log };
}

export function source(env: NodeJS.ProcessEnv = process.env): string {
  return env.TOOLROUTER_CONFIG ? ` (${env.TOOLROUTER_CONFIG} and the environment)` : ' (environment)';
}

/** Runs start-up work; whatever it throws becomes a StartupError ("could not start: ..."). */
export async function starting<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof StartupError) throw error;
    throw new StartupError(`could not start: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}
