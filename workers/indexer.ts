/**
 * The index worker process (`npm run worker`, the same as `toolrouter worker`): consumes index builds from the BullMQ
 * queue in Redis. Run as many as you like; each job is built by one of them.
 */
import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';
import { loadConfig, type Config } from '../src/config/config.js';
import { startIndexWorker } from '../src/indexing/redis/worker.js';
import { createLogger } from '../src/log.js';
import { RedisKeys } from '../src/redis/connection.js';
import { Metrics } from '../src/metrics.js';
import { packageVersion } from '../src/package-root.js';
import { startTelemetry, type Telemetry } from '../src/telemetry/tracing.js';

const config = loadConfig();
const log = createLogger(config.logLevel);
const metrics = new Metrics({ processMetrics: true });
let telemetry: Telemetry | undefined;
try {
  // Builds are traced as children of the requests that queued them (the trace context rides in the job's data).
  telemetry = await startTelemetry({ defaultServiceName: 'toolrouter-worker', version: packageVersion(), log });
  const worker = await startIndexWorker(
    { redis: config.redis, keys: RedisKeys.of(config.queue.prefix, config.redis), embedding: config.embedding, lexical: config.search.lexical, hnsw: config.search.hnsw, queue: config.queue, metrics },
    log,
  );
  const metricsServer = config.worker.metricsPort === undefined ? undefined : await serveMetrics(config.worker, log);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'index worker stopping after the current job');
    // The job's lock lapses without this process, so another worker would retry it: exiting late is the lesser harm.
    setTimeout(() => {
      log.error({ timeoutMs: config.worker.shutdownTimeoutMs }, 'index worker shutdown timed out; exiting with the job unfinished');
      process.exit(1);
    }, config.worker.shutdownTimeoutMs).unref();
    void worker
      .close()
      .then(() => new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve())))
      .then(() => telemetry?.shutdown())
      .then(() => {
        log.info('index worker stopped');
        process.exit(0);
      })
      .catch((error: unknown) => {
        log.error({ err: error }, 'error while stopping the index worker');
        process.exit(1);
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
} catch (error) {
  log.fatal({ err: error }, 'index worker could not start');
  process.exit(1);
}

/** GET /metrics (Prometheus text) and GET /health; the worker has no other HTTP face. */
async function serveMetrics(settings: Config['worker'], log: Logger): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (error: unknown) => {
          log.error({ err: error }, 'metrics collection failed');
          res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'internal', message: 'internal error' } }));
        },
      );
      return;
    }
    if (req.method === 'GET' && path === '/health') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok' }));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'not_found', message: `no route for ${req.method} ${path}` } }));
  });
  // Scrapes are short; keep-alive sockets would only hold close() up.
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.metricsPort, settings.metricsHost, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : settings.metricsPort;
  log.info({ host: settings.metricsHost, port }, 'worker metrics listening');
  return server;
}
