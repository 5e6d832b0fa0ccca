import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Toolrouter } from '../server.js';
import { createMcpServer } from './server.js';

/**
 * stdout carries the protocol; one stray console.log from a dependency would corrupt it. Call before loading anything
 * that might print. (The logger already writes to stderr.)
 */
export function reserveStdoutForProtocol(): void {
  const toStderr = (...args: unknown[]) => console.error(...args);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
}

/**
 * Serves the MCP gateway on stdin/stdout for one client (`toolrouter stdio`). Exits when the client closes stdin or on
 * SIGINT/SIGTERM, closing upstream connections (and their child processes) first.
 */
export async function serveStdio(router: Toolrouter): Promise<void> {
  const server = createMcpServer(router.mcp.gateway, router.log);
  let stopping: Promise<void> | undefined;
  const stop = (reason: string) => {
    stopping ??= (async () => {
      router.log.info({ reason }, 'stdio session ended; shutting down');
      try {
        await server.close().catch(() => {});
        await router.close();
      } catch (error) {
        router.log.error({ err: error }, 'error while closing');
      } finally {
        process.exit(0);
      }
    })();
    return stopping;
  };
  const previousOnClose = server.onclose;
  server.onclose = () => {
    previousOnClose?.();
    void stop('transport closed');
  };
  process.stdin.once('end', () => void stop('stdin closed'));
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
  await server.connect(new StdioServerTransport());
  router.log.info({ upstreams: Object.keys(router.config.mcp.servers) }, 'toolrouter MCP gateway on stdio');
}
