import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';

/**
 * Graceful stop of `serve`. First the drain (`drainMs`): `onDrain` makes /ready fail while every request, new ones
 * included, is served as before, so a load balancer's health check takes the instance out before anything is refused.
 * Then stop accepting connections, let every accepted request finish (its connection closes
 * after the response), then close the service (MCP sessions, upstreams, Redis) and resolve. A request that arrives
 * on an already open keep-alive connection meanwhile is still served, with `Connection: close`.
 *
 * Returns the function to call on SIGTERM; it resolves with the exit code: 0 when everything finished, 1 when the
 * backstop timeout cut requests short.
 */
export function gracefulShutdown(
  server: Server,
  closeService: () => Promise<void>,
  { timeoutMs, log, drainMs = 0, onDrain }: { timeoutMs: number; log: Logger; drainMs?: number; onDrain?: () => void },
): () => Promise<number> {
  const inFlight = new Set<ServerResponse>();
  const drained = new Set<() => void>();
  let stopping = false;
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    if (stopping) res.setHeader('Connection', 'close');
    // The MCP event stream (GET /mcp) lasts as long as its session; closing the sessions ends it, so it is not waited for.
    if (req.method === 'GET' && (req.url === '/mcp' || req.url?.startsWith('/mcp?'))) return;
    inFlight.add(res);
    res.once('close', () => {
      inFlight.delete(res);
      if (inFlight.size === 0) for (const resolve of drained) resolve();
    });
  };
  server.on('request', onRequest);

  let result: Promise<number> | undefined;
  return () => {
    result ??= (async () => {
      if (drainMs > 0) {
        onDrain?.();
        log.info({ drainMs }, 'shutting down: draining (/ready fails, requests are still served)');
        await new Promise((resolve) => setTimeout(resolve, drainMs));
      }
      stopping = true;
      log.info({ inFlight: inFlight.size, timeoutMs }, 'shutting down: finishing in-flight requests');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), timeoutMs);
      });
      const finished = (async () => {
        if (inFlight.size > 0) await new Promise<void>((resolve) => drained.add(resolve));
        await closeService();
        server.closeAllConnections();
        await closed;
        return 'done' as const;
      })();
      const outcome = await Promise.race([finished, timedOut]);
      clearTimeout(timer);
      if (outcome === 'timeout') {
        log.error({ inFlight: inFlight.size, timeoutMs }, 'shutdown timed out; cutting the remaining requests');
        server.closeAllConnections();
        return 1;
      }
      log.info('shut down');
      return 0;
    })().catch((error: unknown) => {
      log.error({ err: error }, 'error while shutting down');
      return 1;
    });
    return result;
  };
}
