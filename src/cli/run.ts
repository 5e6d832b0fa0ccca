/** `toolrouter serve`, `stdio` and `worker`: the long-running processes. */
import { redisForm } from '../redis/settings.js';
import { reserveStdoutForProtocol, serveStdio } from '../mcp/stdio.js';
import { checkListenAddress, createToolrouter, listen } from '../server.js';
import { gracefulShutdown } from '../shutdown.js';
import { startConfig, starting, StartupError, type StartOptions } from './startup.js';

export async function serve(options: StartOptions): Promise<void> {
  const { config, log } = startConfig(options);
  const { router, server } = await starting(async () => {
    checkListenAddress(config);
    const router = await createToolrouter(config, { log });
    return { router, server: await listen(router) };
  });
  // In-flight requests finish first; then MCP sessions, upstream connections (child processes) and Redis close.
  const shutdown = gracefulShutdown(server, () => router.close(), { timeoutMs: config.shutdownTimeoutMs, log: router.log });
  const stop = () => void shutdown().then((code) => process.exit(code));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

export async function stdio(options: StartOptions): Promise<void> {
  reserveStdoutForProtocol();
  const { config, log } = startConfig(options);
  await serveStdio(await starting(() => createToolrouter(config, { log })));
}

export async function worker(options: StartOptions): Promise<void> {
  const { config } = startConfig(options);
  if (!redisForm(config.redis)) {
    throw new StartupError('the index worker needs Redis: set REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES (or redis.url, redis.sentinel or redis.cluster in the config file); without Redis, `serve` indexes in-process');
  }
  // The worker module loads the same configuration itself (it also runs alone as `npm run worker`).
  await import('../../workers/indexer.js');
}
