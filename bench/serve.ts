/**
 * The server the benchmark measures over HTTP, in its own process as users run it: `node --import tsx bench/serve.ts`
 * (ADMIN_KEY from the environment, no Redis, so builds run in the in-process pipeline's worker thread). Prints
 * `{"port": N}` once listening and runs until SIGTERM.
 */
import { loadConfig } from '../src/config/config.js';
import { limitHeapGrowth } from '../src/heap.js';
import { createToolrouter, listen } from '../src/server.js';
import { startTelemetry } from '../src/telemetry/tracing.js';

const config = loadConfig(
  { TOOLROUTER_CONFIG: '', ...(process.env.ADMIN_KEY ? { ADMIN_KEY: process.env.ADMIN_KEY } : {}) },
  { port: 0, host: '127.0.0.1', logLevel: 'silent', bodyLimit: '1gb' },
);
// Traced only when the OTEL_* environment says so, as `toolrouter serve` is (bench/telemetry.ts measures both).
const telemetry = await startTelemetry({ defaultServiceName: 'toolrouter-bench' });
// As `toolrouter serve` does at start.
limitHeapGrowth(config.heapGrowingPercent);
const router = await createToolrouter(config);
const server = await listen(router);
const address = server.address();
process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close();
  void router
    .close()
    .then(() => telemetry?.shutdown())
    .finally(() => process.exit(0));
});
