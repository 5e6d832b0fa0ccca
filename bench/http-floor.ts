/**
 * What a search costs over HTTP above the server's own floor: `node --import tsx bench/http-floor.ts [--size 10000]
 * [--requests 3000] [--mode hybrid|bm25|vector|regex]`. Starts bench/serve.ts, PUTs the bench catalog, then from this
 * process (node:http, one keep-alive socket) alternates `GET /health` and `POST /v1/tools/search`, so both see the same
 * load, and prints the p50/p99 of each and the difference of the p50s: the part of the search's latency that is the
 * search path (parsing, ranking, serialising), not the client, the socket or Express's routing.
 */
import { existsSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadQueries } from '../src/eval/datasets.js';
import { generateCatalog } from './catalog.js';
import { putCatalog, startBenchServer } from './server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const size = Number(arg('--size', '10000'));
const requests = Number(arg('--requests', '3000'));
const mode = arg('--mode', '');

const queryFiles = [path.join(ROOT, 'test/fixtures/livemcpbench-queries.jsonl'), path.join(ROOT, 'test/fixtures/queries.jsonl')];
const queries = queryFiles.filter((file) => existsSync(file)).flatMap((file) => loadQueries(file).map((q) => q.query));

const server = await startBenchServer();
try {
  await putCatalog(server.base, generateCatalog(size));
  const { hostname, port } = new URL(server.base);
  // One socket: both requests travel the same connection, so the difference is the server's work.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const send = (method: string, route: string, body?: string) =>
    new Promise<void>((resolve, reject) => {
      const request = http.request({ host: hostname, port, path: route, method, agent, headers: body ? { 'content-type': 'application/json' } : {} }, (response) => {
        response.resume();
        response.on('end', () => (response.statusCode === 200 ? resolve() : reject(new Error(`${route}: ${response.statusCode}`))));
        response.on('error', reject);
      });
      request.on('error', reject);
      request.end(body);
    });
  const health = () => send('GET', '/health');
  const search = (query: string) => send('POST', '/v1/tools/search', JSON.stringify(mode ? { query, mode } : { query }));

  // Warm-up: the search path compiled and the build's garbage collected (see bench/load.ts).
  for (let i = 0; i < 1000; i++) {
    await health();
    await search(queries[i % queries.length]!);
  }
  const floor: number[] = [];
  const searches: number[] = [];
  for (let i = 0; i < requests; i++) {
    let started = performance.now();
    await health();
    floor.push(performance.now() - started);
    started = performance.now();
    await search(queries[i % queries.length]!);
    searches.push(performance.now() - started);
  }
  agent.destroy();
  const pct = (samples: number[], p: number) => [...samples].sort((a, b) => a - b)[Math.min(samples.length - 1, Math.floor(samples.length * p))]!;
  const round = (ms: number) => Number(ms.toFixed(3));
  const result = {
    size,
    mode: mode || 'hybrid',
    requests,
    node: process.version,
    load: os.loadavg()[0],
    healthMs: { p50: round(pct(floor, 0.5)), p99: round(pct(floor, 0.99)) },
    searchMs: { p50: round(pct(searches, 0.5)), p99: round(pct(searches, 0.99)) },
    aboveFloorMs: round(pct(searches, 0.5) - pct(floor, 0.5)),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await server.stop();
}
