/**
 * What tracing costs on the search path: `node --import tsx bench/telemetry.ts [--tools N] [--requests N] [--rounds N]
 * [--baseline DIR]`.
 *
 * 1. In-process: the span helper around a search (`searchSpan`) against the bare call, tracing off, per call; and with
 *    `--baseline DIR`, hybrid searches of this SearchService against the baseline's over the same index, in one
 *    process, alternating blocks of queries (machine drift falls on both alike); and the same over HTTP: both
 *    routers (this code with tracing off, and the baseline's) listening in this process, `POST /v1/tools/search`
 *    alternating between them in blocks through one keep-alive agent.
 * 2. Over HTTP: `POST /v1/tools/search` p50/p99 (one keep-alive client, bench/load.ts in its own process) from a
 *    bench server (bench/serve.ts) with tracing off, and with tracing on exporting every span (OTLP http/protobuf,
 *    always_on) to a local sink that discards them. With `--baseline DIR` (a checkout of the code before tracing,
 *    e.g. `git archive <commit> | tar -x -C DIR` with node_modules and models linked in) its bench server runs too, so
 *    "off" is compared with no instrumentation at all. Variants alternate for `rounds` rounds, each a fresh process,
 *    so drift on a shared machine spreads over all of them; the median of the rounds' p50s is reported.
 */
import { spawn } from 'node:child_process';
import http, { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config/config.js';
import { createEmbedder } from '../src/embedding/embedder.js';
import { loadQueries } from '../src/eval/datasets.js';
import { createFixedSearch } from '../src/search/fixed.js';
import { SearchService } from '../src/search/search.js';
import { createToolrouter, listen } from '../src/server.js';
import { searchSpan } from '../src/telemetry/spans.js';
import { generateCatalog } from './catalog.js';
import { putCatalog } from './server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1]! : fallback;
};
const TOOLS = Number(option('tools', '10000'));
const REQUESTS = Number(option('requests', '2000'));
const ROUNDS = Number(option('rounds', '3'));
const BASELINE = option('baseline', '');

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

// 1. The helper itself, tracing off: a resolved search answer, so only the wrapper's own cost is left.
async function helperOverhead(): Promise<{ bareNs: number; wrappedNs: number }> {
  const answer = { results: [{ tool: { name: 'tool' }, score: 0.5, scores: {} }] };
  const work = () => Promise.resolve(answer);
  const calls = 1_000_000;
  const bare: number[] = [];
  const wrapped: number[] = [];
  for (let round = 0; round < 5; round++) {
    let started = performance.now();
    for (let i = 0; i < calls; i++) await work();
    bare.push(((performance.now() - started) * 1e6) / calls);
    started = performance.now();
    for (let i = 0; i < calls; i++) await searchSpan({ mode: 'hybrid', topK: 5, query: 'q' }, work);
    wrapped.push(((performance.now() - started) * 1e6) / calls);
  }
  return { bareNs: median(bare), wrappedNs: median(wrapped) };
}

// 2. Over HTTP.
async function startSink(): Promise<{ url: string; spans: () => number; close: () => void }> {
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, spans: () => bytes, close: () => server.close() };
}

function startServer(root: string, env: Record<string, string>): Promise<{ base: string; stop: () => Promise<void> }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')));
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'bench/serve.ts')], { cwd: root, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n').find((candidate) => candidate.startsWith('{'));
      if (line) {
        const { port } = JSON.parse(line) as { port: number };
        resolve({ base: `http://127.0.0.1:${port}`, stop: async () => (child.kill('SIGTERM'), await exited) });
      }
    });
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
  });
}

function load(base: string, queriesFile: string): Promise<number[]> {
  return new Promise((resolve, reject) => {
    // Latency phase only: one client, sequential requests (the concurrent phase is capped to 1 request).
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/load.ts'), base, queriesFile, String(REQUESTS), '1', '1', '1'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('exit', (code) => (code === 0 ? resolve((JSON.parse(out.trim().split('\n').pop()!) as { latencies: number[] }).latencies) : reject(new Error(`load exited ${code}`))));
  });
}

const overhead = await helperOverhead();
process.stderr.write(`helper: bare ${overhead.bareNs.toFixed(1)} ns, wrapped ${overhead.wrappedNs.toFixed(1)} ns per call\n`);

/** Hybrid search p50 of this code against the baseline's SearchService, same index, same process, alternating blocks. */
async function searchAB(queries: string[]): Promise<{ current: number; baseline: number } | undefined> {
  if (!BASELINE) return undefined;
  const config = loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent' });
  const embedder = await createEmbedder({ ...config.embedding });
  const fixed = await createFixedSearch(generateCatalog(TOOLS), { embedder, lexical: config.search.lexical, hnsw: config.search.hnsw, settings: config.search });
  const { SearchService: BaselineService } = (await import(path.join(path.resolve(BASELINE), 'src/search/search.ts'))) as { SearchService: typeof SearchService };
  // A baseline checkout from before SearchServiceOptions takes the same parts as positional arguments.
  const options = { catalog: fixed.catalog, indexes: fixed.indexes, embedder, settings: config.search };
  const positional = BaselineService as unknown as new (...parts: unknown[]) => SearchService;
  const baseline = BaselineService.length > 1 ? new positional(options.catalog, options.indexes, embedder, options.settings) : new BaselineService(options);
  const current = new SearchService(options);
  const samples = { current: [] as number[], baseline: [] as number[] };
  const block = 50;
  for (let i = 0; i < 200; i++) await current.search({ query: queries[i % queries.length]! }).then(() => baseline.search({ query: queries[i % queries.length]! }));
  for (let start = 0; start < REQUESTS * 2; start += block) {
    for (const [name, service] of (start / block) % 2 === 0 ? ([['current', current], ['baseline', baseline]] as const) : ([['baseline', baseline], ['current', current]] as const)) {
      for (let i = start; i < start + block; i++) {
        const began = performance.now();
        await service.search({ query: queries[i % queries.length]! });
        samples[name].push(performance.now() - began);
      }
    }
  }
  const p50 = (values: number[]) => percentile([...values].sort((a, b) => a - b), 50);
  return { current: p50(samples.current), baseline: p50(samples.baseline) };
}

/** Search p50 over HTTP: this code's router (tracing off) and the baseline's, in this process, alternating blocks. */
async function httpAB(queries: string[], catalog: string): Promise<{ current: number; baseline: number } | undefined> {
  if (!BASELINE) return undefined;
  const baselineServer = (await import(path.join(path.resolve(BASELINE), 'src/server.ts'))) as { createToolrouter: typeof createToolrouter; listen: typeof listen };
  const config = loadConfig({ TOOLROUTER_CONFIG: '' }, { port: 0, host: '127.0.0.1', logLevel: 'silent', bodyLimit: '1gb' });
  const routers = { current: await createToolrouter(config), baseline: await baselineServer.createToolrouter(config) };
  const servers = { current: await listen(routers.current), baseline: await baselineServer.listen(routers.baseline) };
  const ports = { current: 0, baseline: 0 };
  for (const name of ['current', 'baseline'] as const) {
    const address = servers[name].address();
    ports[name] = typeof address === 'object' && address ? address.port : 0;
    await putCatalog(`http://127.0.0.1:${ports[name]}`, catalog);
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  const post = (port: number, query: string) =>
    new Promise<void>((resolve, reject) => {
      const request = http.request({ host: '127.0.0.1', port, path: '/v1/tools/search', method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (response) => {
        response.resume();
        response.on('end', () => (response.statusCode === 200 ? resolve() : reject(new Error(`search: ${response.statusCode}`))));
      });
      request.on('error', reject);
      request.end(JSON.stringify({ query }));
    });
  const samples = { current: [] as number[], baseline: [] as number[] };
  const block = 50;
  for (let i = 0; i < 200; i++) for (const name of ['current', 'baseline'] as const) await post(ports[name], queries[i % queries.length]!);
  for (let start = 0; start < REQUESTS * 2; start += block) {
    for (const name of (start / block) % 2 === 0 ? (['current', 'baseline'] as const) : (['baseline', 'current'] as const)) {
      for (let i = start; i < start + block; i++) {
        const began = performance.now();
        await post(ports[name], queries[i % queries.length]!);
        samples[name].push(performance.now() - began);
      }
    }
  }
  agent.destroy();
  for (const name of ['current', 'baseline'] as const) {
    servers[name].closeAllConnections();
    servers[name].close();
    await routers[name].close();
  }
  const p50 = (values: number[]) => percentile([...values].sort((a, b) => a - b), 50);
  return { current: p50(samples.current), baseline: p50(samples.baseline) };
}

const queries = [path.join(ROOT, 'test/fixtures/livemcpbench-queries.jsonl'), path.join(ROOT, 'test/fixtures/queries.jsonl')].flatMap((file) => loadQueries(file).map((q) => q.query));
const queriesFile = path.join(os.tmpdir(), `toolrouter-telemetry-queries-${process.pid}.json`);
writeFileSync(queriesFile, JSON.stringify(queries));
const ab = await searchAB(queries);
if (ab) process.stderr.write(`in-process hybrid p50: this code ${ab.current.toFixed(4)} ms, baseline ${ab.baseline.toFixed(4)} ms\n`);
const catalog = JSON.stringify({ tools: generateCatalog(TOOLS) });
const httpAb = await httpAB(queries, catalog);
if (httpAb) process.stderr.write(`one-process HTTP search p50: this code ${httpAb.current.toFixed(4)} ms, baseline ${httpAb.baseline.toFixed(4)} ms\n`);
if (args.includes('--in-process-only')) process.exit(0);
const sink = await startSink();
const variants: { name: string; root: string; env: Record<string, string> }[] = [
  ...(BASELINE ? [{ name: 'before tracing (baseline)', root: path.resolve(BASELINE), env: {} }] : []),
  { name: 'tracing off', root: ROOT, env: {} },
  { name: 'tracing on (every span exported)', root: ROOT, env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_TRACES_SAMPLER: 'always_on' } },
];
const results = new Map<string, { p50: number[]; p99: number[] }>(variants.map((variant) => [variant.name, { p50: [], p99: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  // Each round starts with another variant, so none always runs first (after a build, or after the heaviest one).
  for (const variant of [...variants.slice(round % variants.length), ...variants.slice(0, round % variants.length)]) {
    const server = await startServer(variant.root, variant.env);
    try {
      await putCatalog(server.base, catalog);
      const latencies = [...(await load(server.base, queriesFile))].sort((a, b) => a - b);
      const entry = results.get(variant.name)!;
      entry.p50.push(percentile(latencies, 50));
      entry.p99.push(percentile(latencies, 99));
      process.stderr.write(`round ${round + 1} ${variant.name}: p50 ${percentile(latencies, 50).toFixed(3)} ms, p99 ${percentile(latencies, 99).toFixed(3)} ms\n`);
    } finally {
      await server.stop();
    }
  }
}
sink.close();

const lines = [
  `Tracing cost on the search path (${TOOLS.toLocaleString('en-US')} tools, ${REQUESTS} sequential searches per run, ${ROUNDS} rounds, median of the rounds; load ${os.loadavg()[0]!.toFixed(1)}):`,
  '',
  `- span helper with tracing off: ${overhead.wrappedNs.toFixed(0)} ns per call against ${overhead.bareNs.toFixed(0)} ns for the bare call`,
  ...(ab ? [`- in-process hybrid search p50, same index, alternating blocks: ${ab.current.toFixed(3)} ms this code (tracing off), ${ab.baseline.toFixed(3)} ms before tracing`] : []),
  ...(httpAb ? [`- HTTP search p50, both routers in one process, alternating blocks: ${httpAb.current.toFixed(3)} ms this code (tracing off), ${httpAb.baseline.toFixed(3)} ms before tracing`] : []),
  '',
  '| server | search p50 (ms) | search p99 (ms) |',
  '| --- | --- | --- |',
  ...variants.map((variant) => {
    const entry = results.get(variant.name)!;
    return `| ${variant.name} | ${median(entry.p50).toFixed(3)} | ${median(entry.p99).toFixed(3)} |`;
  }),
];
process.stdout.write(`${lines.join('\n')}\n`);
