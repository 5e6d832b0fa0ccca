/**
 * HTTP load client for the benchmark, run as its own process so the client does not share the server's event loop:
 * `node bench/load.ts <baseUrl> <queriesJson> <latencyRequests> <clients> <maxRequests> <maxSeconds> [key] [mode]`
 * (key: a toolrouter key sent as a Bearer token, "" for none; mode: the search mode, "" for the default). Phase 1: one
 * client, sequential requests, per-request latency. Phase 2: `clients` concurrent keep-alive clients until
 * `maxRequests` or `maxSeconds`. Prints one JSON line.
 */
import { readFileSync } from 'node:fs';

const [base, queriesFile, latencyArg, clientsArg, maxArg, secondsArg, key, mode] = process.argv.slice(2);
const queries = JSON.parse(readFileSync(queriesFile!, 'utf8')) as string[];

async function post(query: string): Promise<void> {
  const response = await fetch(`${base}/v1/tools/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(mode ? { query, mode } : { query }),
  });
  if (!response.ok) throw new Error(`search: ${response.status} ${await response.text()}`);
  const body = (await response.json()) as { results: unknown[] };
  answered += body.results.length > 0 ? 1 : 0;
}

/** Requests that returned at least one result: a load whose answers are all empty measures nothing. */
let answered = 0;

const latencyRequests = Number(latencyArg);
for (let i = 0; i < 50; i++) await post(queries[i % queries.length]!);
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
process.stdout.write(`${JSON.stringify({ latencies, clients, requests: done, seconds, answered })}\n`);
