/**
 * Profiles the HTTP search path: `node --import tsx bench/profile-http.ts [--size 10000] [--key open|admin|1|50|regex] [--requests 3000]`.
 * Starts bench/serve.ts under `--cpu-prof` (ADMIN_KEY set unless the case is open/regex), PUTs the bench catalog, runs
 * the searches from this process, stops the server and prints the top self-time functions of its profile.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateCatalog } from './catalog.js';
import { putCatalog, startBenchServer } from './server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const size = Number(arg('--size', '10000'));
const caseName = arg('--key', 'open');
const requests = Number(arg('--requests', '3000'));
const ADMIN = 'bench-admin-key-0123456789abcdef';
const keyed = caseName !== 'open' && caseName !== 'regex';
const dir = mkdtempSync(path.join(os.tmpdir(), 'toolrouter-prof-'));

const server = await startBenchServer(keyed ? { ADMIN_KEY: ADMIN } : {}, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
const { base } = server;
const admin: Record<string, string> = keyed ? { authorization: `Bearer ${ADMIN}` } : {};
const tools = generateCatalog(size);
// --phase put profiles the catalog PUT and the index build instead of the searches.
const putFrom = Number(process.hrtime.bigint() / 1000n);
await putCatalog(base, tools, admin);
process.stderr.write(`PUT → searchable ${((Number(process.hrtime.bigint() / 1000n) - putFrom) / 1000).toFixed(0)} ms\n`);
let key = keyed ? ADMIN : '';
if (caseName === '1' || caseName === '50') {
  const every = caseName === '1' ? 100 : 2;
  const reply = await fetch(`${base}/key/generate`, {
    method: 'POST',
    headers: { ...admin, 'content-type': 'application/json' },
    body: JSON.stringify({ allowed_tools: tools.filter((_, i) => i % every === 0).map((tool) => tool.name) }),
  });
  key = ((await reply.json()) as { key: string }).key;
}
const queries = readFileSync(path.join(ROOT, 'test/fixtures/queries.jsonl'), 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { query: string }).query);
const bodies = queries.map((query) => JSON.stringify(caseName === 'regex' ? { query: query.split(/\s+/).find((w) => w.length > 3) ?? query, mode: 'regex' } : { query }));
// Warm-up, then mark where the measured phase starts on the monotonic clock the profiler's timestamps also use.
for (let i = 0; i < 100; i++) await (await fetch(`${base}/v1/tools/search`, { method: 'POST', headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: bodies[i % bodies.length] })).arrayBuffer();
const measuredFrom = arg('--phase', 'search') === 'put' ? putFrom : Number(process.hrtime.bigint() / 1000n);
const latencies: number[] = [];
for (let i = 0; i < requests; i++) {
  const started = performance.now();
  const response = await fetch(`${base}/v1/tools/search`, { method: 'POST', headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: bodies[i % bodies.length] });
  await response.arrayBuffer();
  latencies.push(performance.now() - started);
}
latencies.sort((a, b) => a - b);
process.stdout.write(`case ${caseName}: p50 ${latencies[Math.floor(latencies.length / 2)]!.toFixed(3)} ms p99 ${latencies[Math.floor(latencies.length * 0.99)]!.toFixed(3)} ms\n`);
await server.stop();

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
// The main thread's profile (thread 0); the build worker writes its own.
const file = readdirSync(dir).filter((name) => name.endsWith('.cpuprofile')).sort()[0]!;
const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number };
const self = new Map<number, number>();
let at = profile.startTime;
profile.samples.forEach((id, i) => {
  at += profile.timeDeltas[i] ?? 0;
  // Only the measured searches: not start-up, the catalog PUT, the build or the warm-up.
  if (at >= measuredFrom) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));
});
const byFunction = new Map<string, number>();
for (const node of profile.nodes) {
  const where = `${node.callFrame.functionName || '(anon)'} ${node.callFrame.url.replace(/^.*node_modules\//, 'nm/').replace(/^.*perf22\//, '')}:${node.callFrame.lineNumber + 1}`;
  byFunction.set(where, (byFunction.get(where) ?? 0) + (self.get(node.id) ?? 0));
}
const total = [...byFunction.values()].reduce((a, b) => a + b, 0);
for (const [where, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, Number(arg('--top', '40')))) {
  process.stdout.write(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${where}\n`);
}
process.stdout.write(`profile: ${path.join(dir, file)} measured from ${measuredFrom}\n`);
