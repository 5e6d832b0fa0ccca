/**
 * PUT → searchable and the server's memory for one catalog size, alone (the full `npm run bench` also measures
 * in-process builds, which at 100k tools take minutes): `node --import tsx bench/put.ts [size]`. Starts bench/serve.ts
 * cold, PUTs the bench catalog, waits for the index status to show it indexed, and prints one JSON line: milliseconds,
 * the server's RSS after the build and its peak during it (sampled every 100 ms), and the load average.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateCatalog } from './catalog.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const size = Number(process.argv[2] ?? 100_000);
const loadAtStart = os.loadavg()[0]!;
const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/serve.ts')], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
const port = await new Promise<number>((resolve, reject) => {
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    const line = out.split('\n').find((candidate) => candidate.startsWith('{'));
    if (line) resolve((JSON.parse(line) as { port: number }).port);
  });
  child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
});
const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
const base = `http://127.0.0.1:${port}`;
const rssIdleMb = rssMb();
const body = JSON.stringify({ tools: generateCatalog(size) });
let peakMb = rssIdleMb;
const sampler = setInterval(() => (peakMb = Math.max(peakMb, rssMb())), 100);
const started = performance.now();
const put = await fetch(`${base}/v1/catalog/sources/bench`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body });
if (!put.ok) throw new Error(`PUT: ${put.status} ${await put.text()}`);
const putMs = performance.now() - started;
const { catalogHash } = (await put.json()) as { catalogHash: string };
for (;;) {
  const status = (await (await fetch(`${base}/v1/index/status`)).json()) as { state: string; indexedHash: string | null; lastError?: string };
  if (status.indexedHash === catalogHash && status.state === 'ready') break;
  if (status.state === 'failed') throw new Error(`build failed: ${status.lastError}`);
  await new Promise((resolve) => setTimeout(resolve, 20));
}
const readyMs = performance.now() - started;
clearInterval(sampler);
const rssBuiltMb = rssMb();
await new Promise((resolve) => setTimeout(resolve, 3000));
const rssSettledMb = rssMb();
child.kill('SIGTERM');
await exited;
process.stdout.write(
  `${JSON.stringify({ size, putMs: Math.round(putMs), putToSearchableMs: Math.round(readyMs), rssIdleMb: Math.round(rssIdleMb), rssPeakMb: Math.round(peakMb), rssBuiltMb: Math.round(rssBuiltMb), rssSettledMb: Math.round(rssSettledMb), load: [loadAtStart, os.loadavg()[0]] })}\n`,
);
