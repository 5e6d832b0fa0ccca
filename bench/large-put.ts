/**
 * A large catalog PUT the way a user runs the service (`npm run bench:100k [size]`): builds, starts
 * `node dist/src/cli.js serve` with the Node flags `npm start` uses, without Redis (a temp state dir, a free port, the in-process pipeline), PUTs a realistic
 * catalog (bench/catalog.ts: real tools varied, ~1 KB each) in one request, and meanwhile polls `/v1/index/status` every
 * 50 ms (each answer's latency recorded), samples the service's VmRSS/VmHWM every 100 ms, and searches for a tool only
 * the new catalog has until it is found. Prints one JSON line: PUT answered at, searchable at (both from the PUT's
 * start), peak RSS, status latency max/p99, and the load average at start and end. Killed after `--timeout` seconds
 * (default 180). `--warm` then PUTs the catalog again with one description changed and times the warm rebuild.
 * `--cpu-prof DIR` / `--heap-prof DIR` pass Node's profilers to the service; `--heap-snapshot DIR` has it
 * write a heap snapshot of the settled state there (read it with `node --import tsx bench/heap-summary.ts FILE`).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';
import { Worker } from 'node:worker_threads';
import { generateCatalog } from './catalog.js';
import { startFlags } from './start-flags.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const flag = (name: string) => {
  const at = args.indexOf(name);
  return at >= 0 ? args.splice(at, 2)[1] : undefined;
};
const cpuProf = flag('--cpu-prof');
const heapProf = flag('--heap-prof');
const heapSnapshot = flag('--heap-snapshot');
const timeoutS = Number(flag('--timeout') ?? 180);
const extraParams = Number(flag('--params') ?? 1);
const warm = args.includes('--warm') ? (args.splice(args.indexOf('--warm'), 1), true) : false;
const skipBuild = args.includes('--no-build') ? (args.splice(args.indexOf('--no-build'), 1), true) : false;
const size = Number(args[0] ?? 100_000);

if (!skipBuild) execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });

const loadAtStart = os.loadavg();
// bench/catalog.ts gives ~890 bytes a tool (LiveMCPBench's tools varied); real registries' tools carry more
// parameters. One more described parameter per tool (`--params N` for more; varied by position, so texts stay distinct)
// brings 100k tools to ~102 MB, the size issue 55 measured (99 MB).
const PARAMS = ['page_token', 'include_archived', 'sort_order', 'workspace_id', 'fields', 'timeout_seconds', 'dry_run', 'locale'];
const tools = generateCatalog(size).map((tool, i) => {
  const properties = { ...(tool.inputSchema.properties ?? {}) };
  for (let k = 0; k < extraParams; k++) {
    const param = PARAMS[(i + k * 3) % PARAMS.length]!;
    if (!(param in properties)) {
      properties[param] = { type: k % 2 ? 'boolean' : 'string', description: `Optional ${param.replace(/_/g, ' ')} for this call, variant ${i % 97} (applies to listing and lookups)` };
    }
  }
  return { ...tool, inputSchema: { ...tool.inputSchema, properties } };
});
// A tool only this catalog has, found by its unique name word once the new index serves.
const marker = `zqxmarker${Date.now() % 100000}`;
tools[tools.length - 1] = { ...tools[tools.length - 1]!, name: `${marker}_tool`, description: `Finds the ${marker} record.` };
// Encoded once, here: fetch given the string would encode ~100 MB synchronously at the PUT's start, holding this
// process's event loop, and with it the first status poll's clock, for a few hundred ms the service did not cause.
const body = Buffer.from(JSON.stringify({ tools }));
const bodyMb = body.length / 1e6;

const state = mkdtempSync(path.join(os.tmpdir(), 'toolrouter-large-put-'));
const configFile = path.join(state, 'config.yaml');
writeFileSync(configFile, `host: 127.0.0.1\nport: 0\nlogLevel: warn\nbodyLimit: 1gb\nstateDir: ${JSON.stringify(state)}\n`);
const nodeArgs = [
  ...(cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${cpuProf}`] : []),
  ...(heapProf ? ['--heap-prof', `--heap-prof-dir=${heapProf}`] : []),
  ...(heapSnapshot ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${heapSnapshot}`] : []),
];
const env: NodeJS.ProcessEnv = { ...process.env, TOOLROUTER_CONFIG: configFile, PORT: '0' };
delete env.REDIS_URL;
const port = await freePort();
let done = false;
const child = spawn(process.execPath, [...startFlags(), ...nodeArgs, path.join(ROOT, 'dist/src/cli.js'), 'serve', '--port', String(port)], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
const killer = setTimeout(() => {
  process.stderr.write(`large-put: killed after ${timeoutS} s\n`);
  child.kill('SIGKILL');
  process.exit(2);
}, timeoutS * 1000);
const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
let output = '';
child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
child.once('exit', (code) => {
  if (!done) {
    process.stderr.write(`service exited with ${code}:\n${output}\n`);
    process.exit(1);
  }
});
const base = `http://127.0.0.1:${port}`;
for (;;) {
  try {
    if ((await fetch(`${base}/health`)).ok) break;
  } catch {
    // not listening yet
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
}

// The service loads its embedding model in the background after it starts listening; the PUT waits that out, so the
// status latencies measured are the PUT's and the build's, not the start's.
await new Promise((resolve) => setTimeout(resolve, 3000));

const memory = () => {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
};
const idle = memory();
let peakRss = idle.rss;
const sampler = setInterval(() => {
  try {
    peakRss = Math.max(peakRss, memory().rss);
  } catch {
    // exited
  }
}, 100);

// The status poller runs in a thread of its own: on this thread its clock would also count this process's own work
// (sending the body, the search polls), which the service did not cause. Times are relative to `origin`, the PUT's start.
const pollerCode = `
const { parentPort, workerData } = require('node:worker_threads');
let stop = false;
const samples = [];
parentPort.on('message', () => (stop = true));
(async () => {
  while (!stop) {
    const sent = performance.timeOrigin + performance.now();
    const response = await fetch(workerData.url);
    await response.arrayBuffer();
    samples.push({ at: sent - workerData.origin, ms: performance.timeOrigin + performance.now() - sent });
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  parentPort.postMessage(samples);
})();
`;
const started = performance.now();
const origin = performance.timeOrigin + started;
const pollerThread = new Worker(pollerCode, { eval: true, workerData: { url: `${base}/v1/index/status`, origin } });
const poller = new Promise<{ at: number; ms: number }[]>((resolve, reject) => {
  pollerThread.once('message', resolve);
  pollerThread.once('error', reject);
});
const put = fetch(`${base}/v1/catalog/sources/bench`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body }).then(async (response) => {
  const answeredMs = performance.now() - started;
  if (!response.ok) throw new Error(`PUT: ${response.status} ${await response.text()}`);
  await response.arrayBuffer();
  return answeredMs;
});
let searchableMs: number;
for (;;) {
  const response = await fetch(`${base}/v1/tools/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: marker, mode: 'bm25', top_k: 1 }),
  });
  const text = await response.text();
  if (response.ok && text.includes(`${marker}_tool`)) {
    searchableMs = performance.now() - started;
    break;
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
}
const putMs = await put;
// A few more seconds of status and memory after the swap: the settled state.
await new Promise((resolve) => setTimeout(resolve, 3000));
// `--warm`: the same catalog again with one tool's description changed, timed from that PUT's start until the index
// of the new catalog serves (a warm rebuild: the previous graph reused, one text embedded).
let warmMs: { putAnsweredMs: number; indexedMs: number } | undefined;
if (warm) {
  const changed = tools.map((tool, i) => (i === 5 ? { ...tool, description: `${tool.description ?? ''} Also converts kelvin into fahrenheit.` } : tool));
  const warmBody = Buffer.from(JSON.stringify({ tools: changed }));
  const warmStarted = performance.now();
  const response = await fetch(`${base}/v1/catalog/sources/bench`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: warmBody });
  const answered = performance.now() - warmStarted;
  const { catalogHash } = (await response.json()) as { catalogHash: string };
  for (;;) {
    const status = (await (await fetch(`${base}/v1/index/status`)).json()) as { indexedHash: string | null };
    if (status.indexedHash === catalogHash) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  warmMs = { putAnsweredMs: Math.round(answered), indexedMs: Math.round(performance.now() - warmStarted) };
}
done = true;
pollerThread.postMessage('stop');
const statusLatencies = await poller;
await pollerThread.terminate();
if (heapSnapshot) {
  // The settled heap, written by the service itself (V8 pauses it while writing; nothing is measured after this).
  const before = new Set(readdirSync(heapSnapshot));
  child.kill('SIGUSR2');
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const written = readdirSync(heapSnapshot).find((name) => !before.has(name) && name.endsWith('.heapsnapshot'));
    if (written && statSync(path.join(heapSnapshot, written)).size > 0) {
      const size = statSync(path.join(heapSnapshot, written)).size;
      await new Promise((resolve) => setTimeout(resolve, 2000));
      if (statSync(path.join(heapSnapshot, written)).size === size) break;
    }
  }
}

clearInterval(sampler);
const end = memory();
child.kill('SIGTERM');
await exited;
clearTimeout(killer);
rmSync(state, { recursive: true, force: true });

const sorted = statusLatencies.map((sample) => sample.ms).sort((a, b) => a - b);
const worst = statusLatencies.reduce((a, b) => (b.ms > a.ms ? b : a), { at: 0, ms: 0 });
const round = (value: number) => Math.round(value);
process.stdout.write(
  `${JSON.stringify({
    size,
    bodyMb: Number(bodyMb.toFixed(1)),
    putAnsweredMs: round(putMs),
    searchableMs: round(searchableMs),
    rssIdleMb: round(idle.rss),
    rssPeakMb: round(Math.max(peakRss, end.hwm)),
    rssAfterMb: round(end.rss),
    statusPolls: sorted.length,
    statusMaxMs: round(worst.ms),
    statusMaxAtMs: round(worst.at),
    statusP99Ms: round(sorted[Math.floor(sorted.length * 0.99)] ?? NaN),
    statusOver100ms: sorted.filter((ms) => ms > 100).length,
    // When the slowest polls were sent (ms from the PUT's start) and how long each took: where to look next.
    statusSlowest: [...statusLatencies].sort((a, b) => b.ms - a.ms).slice(0, 5).map((sample) => [round(sample.at), round(sample.ms)]),
    ...(warmMs ? { warm: warmMs } : {}),
    load: { start: loadAtStart.map((v) => Number(v.toFixed(2))), end: os.loadavg().map((v) => Number(v.toFixed(2))) },
  })}\n`,
);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}
