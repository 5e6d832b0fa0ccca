/** `toolrouter serve`, `stdio` and `worker`: the long-running processes. */
import { limitHeapGrowth } from '../heap.js';
import { redisForm } from '../redis/settings.js';
import { reserveStdoutForProtocol, serveStdio } from '../mcp/server/stdio.js';
import { checkListenAddress, createToolrouter, listen } from '../server.js';
import { gracefulShutdown } from '../shutdown.js';
import { startTelemetry, type Telemetry } from '../telemetry/tracing.js';
import { TelemetrySettingsError } from '../telemetry/settings.js';
import { packageVersion } from '../package-root.js';
import type { Logger } from 'pino';
import { startConfig, starting, StartupError, type StartOptions } from './startup.js';

/** Tracing, when the OTEL_* environment asks for it; started before the router so every span has a provider. */
export async function startTracing(defaultServiceName: string, log: Logger): Promise<Telemetry | undefined> {
  try {
    return await startTelemetry({ defaultServiceName, version: packageVersion(), log });
  } catch (error) {
    if (error instanceof TelemetrySettingsError) throw new StartupError(`invalid tracing settings: ${error.message}`);
    throw error;
  }
}

export interface ServeOptions extends StartOptions {
  /** `--port` / `--host`: win over the configuration file and PORT / HOST, as command-line flags do. */
  port?: number;
  host?: string;
}

export async function serve(options: ServeOptions): Promise<void> {
  const started = startConfig(options);
  limitHeapGrowth(started.config.heapGrowingPercent);
  const { log } = started;
  const config = {
    ...started.config,
    ...(options.port !== undefined ? { port: options.port } : {}),
    ...(options.host !== undefined ? { host: options.host } : {}),
  };
  const telemetry = await startTracing('toolrouter', log);
  const { router, server } = await starting(async () => {
    checkListenAddress(config);
    const router = await createToolrouter(config, { log });
    return { router, server: await listen(router) };
  });
  // In-flight requests finish first; then MCP sessions, upstream connections (child processes) and Redis close.
  // First the drain: /ready fails and everything is still served for shutdown.drainMs, so the balancer moves away.
  const shutdown = gracefulShutdown(server, () => router.close(), { timeoutMs: config.shutdownTimeoutMs, drainMs: config.shutdown.drainMs, onDrain: () => router.drain(), log: router.log });
  // Spans still buffered are exported before the process ends.
  const stop = () => void shutdown().then(async (code) => (await telemetry?.shutdown(), process.exit(code)));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

export async function stdio(options: StartOptions): Promise<void> {
  reserveStdoutForProtocol();
  const { config, log } = startConfig(options);
  await startTracing('toolrouter', log);
  await serveStdio(await starting(() => createToolrouter(config, { log })));
}

export async function worker(options: StartOptions): Promise<void> {
  const { config } = startConfig(options);
  limitHeapGrowth(config.heapGrowingPercent);
  if (!redisForm(config.redis)) {
    throw new StartupError('the index worker needs Redis: set REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES (or redis.url, redis.sentinel or redis.cluster in the config file); without Redis, `serve` indexes in-process');
  }
  // The worker module loads the same configuration itself (it also runs alone as `npm run worker`).
  await import('../../workers/indexer.js');
}

