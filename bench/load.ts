/**
 * HTTP load client for the benchmark, run as its own process so the client does not share the server's event loop:
 * `node bench/load.ts <baseUrl> <queriesJson> <latencyRequests> <clients> <maxRequests> <maxSeconds> [key] [mode]`
 * (key: a toolrouter key sent as a Bearer token, "" for none; mode: the search mode, "" for the default). Phase 1: one
 * client, sequential requests, per-request latency. Phase 2: `clients` concurrent keep-alive clients until
 * `maxRequests` or `maxSeconds`. Prints one JSON line.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';

const [base, queriesFile, latencyArg, clientsArg, maxArg, secondsArg, key, mode] = process.argv.slice(2);
const queries = JSON.parse(readFileSync(queriesFile!, 'utf8')) as string[];

/**
 * node:http with a keep-alive agent, as load generators (autocannon, wrk) measure servers: the global fetch (undici)
 * adds about 0.65 ms of its own per request on this machine (a bare node:http server answered in 0.20 ms p50 through
 * http.request and 0.85 ms through fetch, same process), which is the client's cost, not the server's.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const { hostname, port } = new URL(base!);
const headers = { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) };

function post(query: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: hostname, port, path: '/v1/tools/search', method: 'POST', agent, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        if (response.statusCode !== 200) return reject(new Error(`search: ${response.statusCode} ${text}`));
        const body = JSON.parse(text) as { results: unknown[] };
        answered += body.results.length > 0 ? 1 : 0;
        resolve();
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(JSON.stringify(mode ? { query, mode } : { query }));
  });
}

/** Requests that returned at least one result: a load whose answers are all empty measures nothing. */
let answered = 0;
const WARM_UP = 1000;

const latencyRequests = Number(latencyArg);
// Warm-up until the server's search path is compiled and the build's garbage collected: the first few hundred requests
// after a build ran up to 0.5 ms slower.
for (let i = 0; i < WARM_UP; i++) await post(queries[i % queries.length]!);
const latencies: number[] = [];
for (let i = 0; i < latencyRequests; i++) {
  const started = performance.now();
  await post(queries[i % queries.length]!);
  latencies.push(performance.now() - started);
}

const clients = Number(clientsArg);
const maxRequests = Number(maxArg);
const started = performance.now();
const deadline = started + Number(secondsArg) * 1000;
let issued = 0;
let done = 0;
await Promise.all(
  Array.from({ length: clients }, async () => {
    while (issued < maxRequests && performance.now() < deadline) {
      await post(queries[issued++ % queries.length]!);
      done++;
    }
  }),
);
const seconds = (performance.now() - started) / 1000;
process.stdout.write(`${JSON.stringify({ latencies, clients, requests: done, seconds, answered, warmUp: WARM_UP })}\n`);
agent.destroy();
