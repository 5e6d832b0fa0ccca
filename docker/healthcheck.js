// The image's HEALTHCHECK. One image runs either `serve` or `worker` (PID 1 is `node bin/toolrouter.js <command>`),
// and each has its own /health: the API's on PORT, the worker's on WORKER_METRICS_PORT when it serves metrics.
/* global fetch, AbortSignal */
import { readFileSync } from 'node:fs';

const args = readFileSync('/proc/1/cmdline', 'utf8').split('\0');
const worker = args.includes('worker');
const port = worker ? process.env.WORKER_METRICS_PORT : process.env.PORT || '8080';
// A worker without a metrics port has no HTTP face: it is healthy while it runs (a worker that exits stops the
// container, and the restart policy takes over).
if (!port) process.exit(0);
fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2_500) }).then(
  (response) => process.exit(response.ok ? 0 : 1),
  () => process.exit(1),
);
