/**
 * PUT → searchable and the server's memory for one catalog size, alone (the full `npm run bench` also measures
 * in-process builds, which at 100k tools take minutes): `node --import tsx bench/put.ts [size]`. Starts bench/serve.ts
 * cold, PUTs the bench catalog, waits for the index status to show it indexed, and prints one JSON line: milliseconds,
 * the server's RSS after the build, 3 s later, and after a round of searches in every mode (what search itself keeps:
 * prepared regex text, per-index scratch), its peak during the build (sampled every 100 ms), and the load average.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadQueries } from '../src/eval/datasets.js';
import { generateCatalog } from './catalog.js';
import { putCatalog, startBenchServer } from './server-process.js';

const size = Number(process.argv[2] ?? 100_000);
const loadAtStart = os.loadavg()[0]!;
const server = await startBenchServer();
const rssIdleMb = server.rssMb();
const body = JSON.stringify({ tools: generateCatalog(size) });
let peakMb = rssIdleMb;
const sampler = setInterval(() => (peakMb = Math.max(peakMb, server.rssMb())), 100);
const { putMs, searchableMs: readyMs } = await putCatalog(server.base, body);
clearInterval(sampler);
const rssBuiltMb = server.rssMb();
await new Promise((resolve) => setTimeout(resolve, 3000));
const rssSettledMb = server.rssMb();
const queries = loadQueries(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test/fixtures/queries.jsonl')).map((query) => query.query);
for (const mode of ['hybrid', 'bm25', 'vector', 'regex'] as const) {
  for (const query of queries) {
    const search = await fetch(`${server.base}/v1/tools/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: mode === 'regex' ? query.split(' ')[0] : query, mode, top_k: 10 }),
    });
    if (!search.ok) throw new Error(`search (${mode}): ${search.status} ${await search.text()}`);
    await search.arrayBuffer();
  }
}
const rssSearchedMb = server.rssMb();
await server.stop();
process.stdout.write(
  `${JSON.stringify({ size, putMs: Math.round(putMs), putToSearchableMs: Math.round(readyMs), rssIdleMb: Math.round(rssIdleMb), rssPeakMb: Math.round(peakMb), rssBuiltMb: Math.round(rssBuiltMb), rssSettledMb: Math.round(rssSettledMb), rssSearchedMb: Math.round(rssSearchedMb), searches: queries.length * 4, load: [loadAtStart, os.loadavg()[0]] })}\n`,
);
