/**
 * `npm run bench [-- --sizes 1000,10000,100000] [--quick] [--no-write] [--queries N] [--http-max N] [--keys-max N]`
 * `npm run bench -- --from-json FILE [--seconds S]`: the report from the per-size JSON lines a run printed to stderr.
 *
 * For each catalog size (each in its own child process, so memory figures are per size): index build time (cold and
 * warm embedding cache), search latency in-process and over HTTP, HTTP throughput with concurrent keep-alive clients,
 * RSS and index bytes, query-embedding time, the same for the two reference rankers (reproductions of FastMCP's BM25
 * and LiteLLM's token overlap from src/eval/baselines.ts), and the token report. Writes its section of BENCHMARKS.md
 * between `<!-- bench:start -->` and `<!-- bench:end -->`.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { countTokens } from 'gpt-tokenizer';
import type { Tool } from '../src/catalog/types.js';
import { loadConfig, type Config } from '../src/config/config.js';
import { createEmbedder, type Embedder } from '../src/embedding/embedder.js';
import { FastMcpBm25, LiteLlmTokenOverlap } from '../src/eval/baselines.js';
import { loadQueries } from '../src/eval/datasets.js';
import { serializeIndex } from '../src/indexing/artifact.js';
import { MemoryEmbeddingCache } from '../src/indexing/embedding-cache.js';
import { ExactVectorIndex, HnswVectorIndex } from '../src/indexing/vector.js';
import { buildSearchIndex, type SearchIndex } from '../src/indexing/search-index.js';
import { createFixedSearch, fixedCatalog } from '../src/search/fixed.js';
import type { SearchMode } from '../src/search/search.js';
import { createToolrouter } from '../src/server.js';
import { baseTools, generateCatalog } from './catalog.js';
import { putCatalog, startBenchServer } from './server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const START = '<!-- bench:start -->';
const END = '<!-- bench:end -->';

interface Stats {
  p50: number;
  p99: number;
  n: number;
}

interface SizeResult {
  size: number;
  /** 1-minute load average when this size started and ended: the cores are shared, timings move with other work. */
  load: [number, number];
  baseSource: string;
  indexKind: string;
  modelLoadMs: number;
  catalogMs: number;
  buildColdMs: number;
  buildWarmMs: number;
  embeddedCold: number;
  embeddedWarm: number;
  indexBytes: number;
  rssMb: number;
  heapMb: number;
  /** V8 heap committed (used plus free pages it keeps). */
  heapTotalMb: number;
  /** Memory outside the V8 heap that V8 knows of (typed-array buffers, native objects reporting it). */
  externalMb: number;
  queryEmbed: Stats;
  /** Share of the exact scan's top 10 that the vector index returns (1 for the exact index). */
  vectorRecall: number;
  inProcess: Record<string, Stats>;
  fastMcp: { buildMs: number; search: Stats };
  liteLlm: { buildMs: number; search: Stats };
  http?: HttpResult;
  httpSkipped?: string;
  tokens: { catalog: number; virtualTools: number; answer: number; answerResults: number };
}

interface Throughput {
  clients: number;
  requests: number;
  seconds: number;
  rps: number;
}

/** One kind of caller over HTTP against a server process of its own: latency (one client) and throughput (8). */
interface HttpCase {
  search: Stats;
  throughput: Throughput;
  /** Share of requests answered with at least one result. */
  answered: number;
}

interface HttpResult {
  /** PUT of the whole catalog to its index status showing it indexed (cold: a new server process). */
  putToReadyMs: number;
  /** Resident memory of the server process after the build and the load (worker thread included). */
  rssMb: number;
  /** The same, right after the build (before any search). */
  rssBuiltMb: number;
  cases: Record<string, HttpCase>;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function stats(samples: number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), n: sorted.length };
}

async function time<T>(work: () => Promise<T> | T): Promise<[T, number]> {
  const started = performance.now();
  const value = await work();
  return [value, performance.now() - started];
}

/**
 * Full garbage collection, twice: native memory of collected objects (the discarded cold index's HNSW graph and typed
 * arrays, the serialised artifact) is released by finalizers that run after the first collection, not during it.
 */
async function collect(): Promise<void> {
  for (let round = 0; round < 2; round++) {
    global.gc?.();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Runs `fn` over the query list (cycled) `n` times after a short warm-up; per-call milliseconds. */
async function measure(queries: string[], n: number, fn: (query: string) => unknown): Promise<Stats> {
  for (let i = 0; i < Math.min(20, n); i++) await fn(queries[i % queries.length]!);
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const query = queries[i % queries.length]!;
    const started = performance.now();
    await fn(query);
    samples.push(performance.now() - started);
  }
  return stats(samples);
}

function benchQueries(): string[] {
  const files = [path.join(ROOT, 'test/fixtures/livemcpbench-queries.jsonl'), path.join(ROOT, 'test/fixtures/queries.jsonl')];
  return files.filter((file) => existsSync(file)).flatMap((file) => loadQueries(file).map((q) => q.query));
}

const mb = (bytes: number) => bytes / 1024 / 1024;

function benchConfig(overrides: Record<string, unknown> = {}): Config {
  // A bare environment: no Redis, no config file, so the in-process pipeline is what gets measured.
  return loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent', ...overrides });
}

async function runSize(size: number, options: { queries: number; httpMax: number; keysMax: number }): Promise<SizeResult> {
  const loadAtStart = os.loadavg()[0]!;
  const { source: baseSource } = baseTools();
  // The bench's own copy of the input is dropped while the router is measured (a server keeps only its catalog, not
  // the request it came in) and generated again, identically, for the reference rankers and the token report.
  let tools: Tool[] | undefined = generateCatalog(size);
  const queries = benchQueries();
  // Slow rankers (LiteLLM's scan, HTTP) get fewer samples at large sizes so a run stays bounded.
  const n = options.queries;
  const config = benchConfig();

  const [embedder, modelLoadMs] = await time(() => createEmbedder({ ...config.embedding }));
  const [catalog, catalogMs] = await time(() => fixedCatalog(tools!, { separator: config.catalog.separator, source: 'bench' }));
  tools = undefined;
  const cache = new MemoryEmbeddingCache();
  const buildOptions = { embedder, cache, lexical: config.search.lexical, hnsw: config.search.hnsw };
  // Only the stats of the cold build are kept, so its index can be collected before memory is measured.
  const [coldStats, buildColdMs] = await time(async () => (await buildSearchIndex(catalog.snapshot(), buildOptions)).stats);
  await collect();
  // The measured stack is the one evaluation and the chat tool-list cache run: createFixedSearch over the same catalog.
  const [warm, buildWarmMs] = await time(() => createFixedSearch(catalog, { ...buildOptions, settings: config.search }));
  const { index, search } = warm;
  const indexBytes = serializeIndex(index, config.search.hnsw).length;
  await collect();
  const memory = process.memoryUsage();

  const queryEmbed = await measure(queries, n, (q) => embedder.embed([q]));
  const vectorRecall = await measureVectorRecall(index.vectors, embedder, queries);
  const inProcess: Record<string, Stats> = {};
  for (const mode of ['hybrid', 'bm25', 'vector'] as SearchMode[]) {
    inProcess[mode] = await measure(queries, n, (q) => search.search({ query: q, mode }));
  }

  tools = generateCatalog(size);
  const [fast, fastBuildMs] = await time(() => new FastMcpBm25(tools!));
  const fastSearch = await measure(queries, n, (q) => fast.search(q, 5));
  const [lite, liteBuildMs] = await time(() => new LiteLlmTokenOverlap(tools!));
  const liteSearch = await measure(queries, size >= 50_000 ? Math.min(n, 100) : n, (q) => lite.search(q, 5));

  // Token report: every definition as the model would see it, versus the two virtual tools plus one search answer.
  const catalogTokens = tools.reduce(
    (sum, tool) => sum + countTokens(JSON.stringify({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema })),
    0,
  );

  let http: SizeResult['http'];
  let httpSkipped: string | undefined;
  let virtualTools: Tool[];
  {
    // Only for the virtual tool definitions in the token report: no catalog, no listener.
    const router = await createToolrouter(benchConfig(), { embedder });
    virtualTools = router.mcp.gateway.virtualTools();
    await router.close();
  }
  if (size <= options.httpMax) {
    http = await measureHttp(tools, queries, n, size <= options.keysMax);
  } else {
    httpSkipped = `HTTP skipped above ${options.httpMax} tools (--http-max)`;
  }
  const virtualTokens = countTokens(JSON.stringify(virtualTools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }))));
  // A typical search_tools answer: the JSON text content the MCP gateway returns for 5 results (averaged over queries).
  let answerTokens = 0;
  let answerResults = 0;
  const sample = queries.slice(0, 20);
  for (const query of sample) {
    const response = await search.search({ query });
    const answer = response.results.map((hit) => ({ ...hit.tool, score: hit.score, scores: hit.scores }));
    answerResults += answer.length;
    answerTokens += countTokens(JSON.stringify({ tools: answer }));
  }

  return {
    size,
    load: [loadAtStart, os.loadavg()[0]!],
    baseSource,
    indexKind: index.vectors.kind,
    modelLoadMs,
    catalogMs,
    buildColdMs,
    buildWarmMs,
    embeddedCold: coldStats.embedded,
    embeddedWarm: warm.stats.embedded,
    indexBytes,
    rssMb: mb(memory.rss),
    heapMb: mb(memory.heapUsed),
    heapTotalMb: mb(memory.heapTotal),
    externalMb: mb(memory.external),
    queryEmbed,
    vectorRecall,
    inProcess,
    fastMcp: { buildMs: fastBuildMs, search: fastSearch },
    liteLlm: { buildMs: liteBuildMs, search: liteSearch },
    ...(http ? { http } : {}),
    ...(httpSkipped ? { httpSkipped } : {}),
    tokens: { catalog: catalogTokens, virtualTools: virtualTokens, answer: Math.round(answerTokens / sample.length), answerResults: answerResults / sample.length },
  };
}

const BENCH_ADMIN_KEY = 'bench-admin-key-0123456789abcdef';

/**
 * What users hit: a server in its own process (as `npm start` runs it: no Redis, builds in a worker thread), the catalog
 * PUT over HTTP, then searches from a separate client process. The open service (no key) is measured on one server;
 * with `keyed`, a second server with ADMIN_KEY measures the admin key and keys that see 1% and 50% of the catalog.
 */
async function measureHttp(tools: Tool[], queries: string[], n: number, keyed: boolean): Promise<HttpResult> {
  const queriesFile = path.join(os.tmpdir(), `toolrouter-bench-queries-${process.pid}.json`);
  writeFileSync(queriesFile, JSON.stringify(queries));
  // Regex mode gets a word of each query: a pattern that matches some tools, as a user's would.
  const regexFile = path.join(os.tmpdir(), `toolrouter-bench-regex-${process.pid}.json`);
  writeFileSync(regexFile, JSON.stringify(queries.map((query) => query.split(/\s+/).find((word) => word.length > 3) ?? query)));
  const load = async (base: string, file: string, key = '', mode = ''): Promise<HttpCase> => {
    const result = JSON.parse(
      await runNode([path.join(ROOT, 'bench/load.ts'), base, file, String(n), '8', String(20 * n), '5', key, mode]),
    ) as { latencies: number[]; clients: number; requests: number; seconds: number; answered: number; warmUp: number };
    return {
      search: stats(result.latencies),
      throughput: { clients: result.clients, requests: result.requests, seconds: result.seconds, rps: result.requests / result.seconds },
      answered: result.answered / (result.latencies.length + result.warmUp + result.requests),
    };
  };
  const cases: Record<string, HttpCase> = {};
  try {
    const open = await startBenchServer();
    try {
      const putToReadyMs = (await putCatalog(open.base, tools)).searchableMs;
      const rssBuiltMb = open.rssMb();
      await settle();
      cases['open (no key)'] = await load(open.base, queriesFile);
      cases['regex (no key)'] = await load(open.base, regexFile, '', 'regex');
      const rssMb = open.rssMb();
      if (keyed) {
        // Its own server: a service with ADMIN_KEY set refuses callers without a key.
        await open.stop();
        const closed = await startBenchServer({ ADMIN_KEY: BENCH_ADMIN_KEY });
        try {
          const admin = { authorization: `Bearer ${BENCH_ADMIN_KEY}` };
          await putCatalog(closed.base, tools, admin);
          await settle();
          const keyFor = async (share: number) => {
            const every = Math.round(1 / share);
            const allowed = tools.filter((_, i) => i % every === 0).map((tool) => tool.name);
            const reply = await fetch(`${closed.base}/key/generate`, {
              method: 'POST',
              headers: { ...admin, 'content-type': 'application/json' },
              body: JSON.stringify({ allowed_tools: allowed }),
            });
            if (!reply.ok) throw new Error(`key/generate: ${reply.status} ${await reply.text()}`);
            return ((await reply.json()) as { key: string }).key;
          };
          cases['admin key'] = await load(closed.base, queriesFile, BENCH_ADMIN_KEY);
          cases['key seeing 1%'] = await load(closed.base, queriesFile, await keyFor(0.01));
          cases['key seeing 50%'] = await load(closed.base, queriesFile, await keyFor(0.5));
        } finally {
          await closed.stop();
        }
      }
      return { putToReadyMs, rssMb, rssBuiltMb, cases };
    } finally {
      await open.stop();
    }
  } finally {
    rmSync(queriesFile, { force: true });
    rmSync(regexFile, { force: true });
  }
}

/** Recall@10 of the HNSW graph against an exact scan over the same vectors (read back from the graph), per query. */
async function measureVectorRecall(vectors: SearchIndex['vectors'], embedder: Embedder, queries: string[]): Promise<number> {
  if (!(vectors instanceof HnswVectorIndex)) return 1;
  const count = vectors.names.length;
  const exact = new ExactVectorIndex(
    vectors.names,
    Array.from({ length: count }, (_, label) => Float32Array.from(vectors.index.getPoint(label))),
  );
  const distinct = [...new Set(queries)];
  let found = 0;
  for (const vector of await embedder.embed(distinct)) {
    const truth = new Set(exact.search(vector, 10).map((hit) => hit.name));
    found += vectors.search(vector, 10).filter((hit) => truth.has(hit.name)).length;
  }
  return found / (distinct.length * 10);
}

// ---------------------------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------------------------

const ms = (value: number) => (value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(3));
const int = (value: number) => Math.round(value).toLocaleString('en-US');
const ratio = (ours: number, theirs: number) => `${(theirs / ours).toFixed(1)}×`;

/**
 * Latency is measured on a settled server: for a few seconds after a build the process is still collecting the build's
 * garbage and the build thread is exiting, which showed as +0.5 ms p50 on whichever case ran first.
 */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 3000));
}

function report(results: SizeResult[], command: string, seconds: number, load: [number, number]): string {
  const cpus = os.cpus();
  const lines: string[] = [];
  lines.push('## Scale benchmark (`npm run bench`)', '');
  lines.push(
    `Generated by \`${command}\` on ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC in ${seconds.toFixed(0)} s. ` +
      `Machine: ${cpus[0]?.model.trim() ?? 'unknown CPU'}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GB, ` +
      `${os.type()} ${os.release()}, Node ${process.version}; load average (1 min) ${load[0].toFixed(2)} at the start, ${load[1].toFixed(2)} at the end ` +
      `(the cores are shared, so timings move with other work). Catalogs: ${results[0]?.baseSource ?? ''} varied into N distinct tools ` +
      '(`bench/catalog.ts`: suffixed names, a clause from another tool\'s description, a borrowed parameter; seed 42). Queries: ' +
      'the project\'s labelled fixture queries, cycled. Offline model, default settings. Each size runs in its own process.',
    '',
  );
  lines.push(
    '"FastMCP BM25" and "LiteLLM overlap" are **reproductions** of those peers\' rankers (`src/eval/baselines.ts`), not their code; ' +
      'the ratio is how many times slower (>1×) or faster (<1×) the reference is than toolrouter hybrid on the same catalog and queries. ' +
      'Latencies are milliseconds; "in-process" is `SearchService.search` (query embedding included), "HTTP" is `POST /v1/tools/search` ' +
      'to a server in its own process (`bench/serve.ts`: no Redis, index builds in its worker thread) over loopback keep-alive from a separate ' +
      'client process (`bench/load.ts`, node:http with a keep-alive agent; the global fetch would add about 0.65 ms of its own per request), one client, 3 s after the build and after 1,000 warm-up requests (right after a build the process is still collecting its garbage and compiling the search path: up to 0.5 ms slower); throughput uses 8 concurrent clients in that process for at most 5 s. ' +
      '"vector recall@10" is the share of an exact scan\'s top 10 that the vector index returns for the distinct bench queries (1 for the exact index).',
    '',
  );
  lines.push('| tools | load (start → end) | index | build cold | build warm | index bytes | RSS | hybrid p50 / p99 | bm25 p50 | vector p50 | vector recall@10 | query embed p50 | HTTP p50 / p99 | HTTP req/s (8 clients) |');
  lines.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of results) {
    const h = r.inProcess.hybrid!;
    const open = r.http?.cases['open (no key)'];
    lines.push(
      `| ${int(r.size)} | ${r.load[0].toFixed(1)} → ${r.load[1].toFixed(1)} | ${r.indexKind} | ${ms(r.buildColdMs)} ms | ${ms(r.buildWarmMs)} ms | ${(mb(r.indexBytes)).toFixed(1)} MB | ${r.rssMb.toFixed(0)} MB | ` +
        `${ms(h.p50)} / ${ms(h.p99)} | ${ms(r.inProcess.bm25!.p50)} | ${ms(r.inProcess.vector!.p50)} | ${r.vectorRecall.toFixed(3)} | ${ms(r.queryEmbed.p50)} | ` +
        (open ? `${ms(open.search.p50)} / ${ms(open.search.p99)} | ${int(open.throughput.rps)} |` : 'skipped | skipped |'),
    );
  }
  lines.push('', '### Over HTTP, by caller', '');
  lines.push(
    'Hybrid search unless the row says regex (a word of each bench query as the pattern). "no key" is a service without ADMIN_KEY; the admin ' +
      'and restricted keys run against a second server with ADMIN_KEY set, the restricted keys allowed every 100th or every 2nd tool. ' +
      '"answered" is the share of requests with at least one result.',
    '',
  );
  lines.push('| tools | caller | HTTP p50 / p99 | req/s (8 clients) | answered |');
  lines.push('| --- | --- | --- | --- | --- |');
  for (const r of results) {
    for (const [caller, c] of Object.entries(r.http?.cases ?? {})) {
      lines.push(`| ${int(r.size)} | ${caller} | ${ms(c.search.p50)} / ${ms(c.search.p99)} | ${int(c.throughput.rps)} | ${(100 * c.answered).toFixed(0)}% |`);
    }
  }
  lines.push('', '### Reference rankers on the same catalogs', '');
  lines.push('| tools | ranker | build | search p50 / p99 | p50 vs toolrouter hybrid |');
  lines.push('| --- | --- | --- | --- | --- |');
  for (const r of results) {
    const h = r.inProcess.hybrid!;
    lines.push(`| ${int(r.size)} | toolrouter hybrid | ${ms(r.buildColdMs)} ms cold | ${ms(h.p50)} / ${ms(h.p99)} | 1.0× |`);
    lines.push(`| ${int(r.size)} | toolrouter bm25 | (in the build) | ${ms(r.inProcess.bm25!.p50)} / ${ms(r.inProcess.bm25!.p99)} | ${ratio(h.p50, r.inProcess.bm25!.p50)} |`);
    lines.push(`| ${int(r.size)} | FastMCP BM25 (reproduction) | ${ms(r.fastMcp.buildMs)} ms | ${ms(r.fastMcp.search.p50)} / ${ms(r.fastMcp.search.p99)} | ${ratio(h.p50, r.fastMcp.search.p50)} |`);
    lines.push(`| ${int(r.size)} | LiteLLM overlap (reproduction) | ${ms(r.liteLlm.buildMs)} ms | ${ms(r.liteLlm.search.p50)} / ${ms(r.liteLlm.search.p99)} | ${ratio(h.p50, r.liteLlm.search.p50)} |`);
  }
  lines.push('', '### Build and server details', '');
  lines.push('| tools | model load | catalog (hash, text) | cold build (embedded) | warm build (embedded) | PUT → searchable over HTTP (cold server) | server RSS after build / after load |');
  lines.push('| --- | --- | --- | --- | --- | --- | --- |');
  for (const r of results) {
    lines.push(
      `| ${int(r.size)} | ${ms(r.modelLoadMs)} ms | ${ms(r.catalogMs)} ms | ${ms(r.buildColdMs)} ms (${int(r.embeddedCold)}) | ${ms(r.buildWarmMs)} ms (${int(r.embeddedWarm)}) | ` +
        (r.http
          ? `${ms(r.http.putToReadyMs)} ms | ${r.http.rssBuiltMb.toFixed(0)} MB / ${r.http.rssMb.toFixed(0)} MB |`
          : `${r.httpSkipped} | |`),
    );
  }
  lines.push('', '### Targets (issue 22)', '');
  lines.push('Measured in this run; "—" where the size was not run. Throughput is compared in the text, against a run of the code before the change.', '');
  lines.push('| target | measured | |');
  lines.push('| --- | --- | --- |');
  const at = (size: number) => results.find((r) => r.size === size);
  const http10k = at(10_000)?.http?.cases ?? {};
  for (const [caller, limit] of [['open (no key)', 1.5], ['admin key', 1.5], ['key seeing 1%', 1.5], ['key seeing 50%', 1.5], ['regex (no key)', 2]] as const) {
    const c = http10k[caller];
    lines.push(`| 10k over HTTP, ${caller}: p50 ≤ ${limit} ms | ${c ? `${ms(c.search.p50)} ms` : '—'} | ${c ? (c.search.p50 <= limit ? 'met' : 'not met') : ''} |`);
  }
  const big = at(100_000)?.http;
  lines.push(`| 100k PUT → searchable ≤ 30 s (cold server) | ${big ? `${(big.putToReadyMs / 1000).toFixed(1)} s` : '—'} | ${big ? (big.putToReadyMs <= 30_000 ? 'met' : 'not met') : ''} |`);
  lines.push(`| 100k RSS with the server ≤ 1 GB (after build / after load) | ${big ? `${big.rssBuiltMb.toFixed(0)} / ${big.rssMb.toFixed(0)} MB` : '—'} | ${big ? (Math.max(big.rssBuiltMb, big.rssMb) <= 1024 ? 'met' : 'not met') : ''} |`);
  lines.push('', '### Token report (o200k_base, gpt-tokenizer)', '');
  lines.push(
    'Full catalog = every tool as `{name, description, inputSchema}` JSON. Router = the gateway\'s two virtual tool definitions ' +
      '(`search_tools`, `call_tool`) plus one typical `search_tools` answer (5 results with full definitions and scores, averaged over 20 queries).',
    '',
  );
  lines.push('| tools | full catalog | virtual tools | search answer | router total | saved |');
  lines.push('| --- | --- | --- | --- | --- | --- |');
  for (const r of results) {
    const total = r.tokens.virtualTools + r.tokens.answer;
    lines.push(
      `| ${int(r.size)} | ${int(r.tokens.catalog)} | ${int(r.tokens.virtualTools)} | ${int(r.tokens.answer)} | ${int(total)} | ${(100 * (1 - total / r.tokens.catalog)).toFixed(2)}% (${ratio(total, r.tokens.catalog)} fewer) |`,
    );
  }
  return lines.join('\n');
}

function writeBenchmarks(section: string): void {
  const file = path.join(ROOT, 'BENCHMARKS.md');
  const current = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const block = `${START}\n${section}\n${END}`;
  const start = current.indexOf(START);
  const end = current.indexOf(END);
  const next = start >= 0 && end > start ? current.slice(0, start) + block + current.slice(end + END.length) : `${current.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, next);
}

// ---------------------------------------------------------------------------------------------------------------
// Entry
// ---------------------------------------------------------------------------------------------------------------

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** Runs a TypeScript entry in a new Node process; resolves with the last line it printed (`whole`: all it printed). */
function runNode(args: string[], nodeFlags: string[] = [], whole = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${path.basename(args[0]!)} exited with ${code}`));
      resolve(whole ? out.trim() : (out.trim().split('\n').pop() ?? ''));
    });
  });
}

interface LargePut {
  bodyMb: number;
  putAnsweredMs: number;
  searchableMs: number;
  rssPeakMb: number;
  rssAfterMb: number;
  statusPolls: number;
  statusMaxMs: number;
  statusP99Ms: number;
  statusOver100ms: number;
  load: { start: number[]; end: number[] };
}

/** bench/large-put.ts's JSON line as this report's section, with issue 55's targets. */
function largePutReport(line: string): string {
  const title = '### A 100,000-tool catalog PUT as `npm start` serves it (`bench/large-put.ts`, issue 55)';
  if (!line.startsWith('{')) return `${title}\n\n${line}`;
  const run = JSON.parse(line) as LargePut;
  const mib = (value: number) => `${value.toLocaleString('en-US')} MiB`;
  return [
    title,
    '',
    `\`npm run build\`, then \`node <npm start's flags> dist/src/cli.js serve\` without Redis; one PUT of ${run.bodyMb} MB; status polled every 50 ms from a thread of its own; RSS (VmRSS, MiB) every 100 ms and VmHWM at the end. Times from the PUT's start.`,
    '',
    '| load (1 min, start → end) | PUT answered | searchable | peak RSS | after | status max / p99 | status polls over 100 ms |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    `| ${run.load.start[0]} → ${run.load.end[0]} | ${run.putAnsweredMs.toLocaleString('en-US')} ms | ${run.searchableMs.toLocaleString('en-US')} ms | ${mib(run.rssPeakMb)} | ${mib(run.rssAfterMb)} | ${run.statusMaxMs} / ${run.statusP99Ms} ms | ${run.statusOver100ms} of ${run.statusPolls} |`,
    '',
    '| target | measured | |',
    '| --- | --- | --- |',
    `| searchable within 20 s of the PUT's start | ${(run.searchableMs / 1000).toFixed(1)} s | ${run.searchableMs <= 20_000 ? 'met' : 'not met'} |`,
    `| peak RSS at or under 1 GB (1,000,000,000 bytes = 954 MiB) | ${mib(run.rssPeakMb)} | ${run.rssPeakMb <= 954 ? 'met' : 'not met'} |`,
    `| \`/v1/index/status\` within 100 ms throughout | max ${run.statusMaxMs} ms | ${run.statusMaxMs <= 100 ? 'met' : 'not met'} |`,
  ].join('\n');
}

async function runChild(size: number, passthrough: string[]): Promise<SizeResult> {
  const line = await runNode([fileURLToPath(import.meta.url), '--child', String(size), ...passthrough], ['--expose-gc', '--max-old-space-size=8192']);
  return JSON.parse(line) as SizeResult;
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const queries = Number(arg('--queries') ?? (quick ? 300 : 1000));
  const httpMax = Number(arg('--http-max') ?? 100_000);
  // Keyed HTTP cases need a second server (and build); above this size only the open service is measured.
  const keysMax = Number(arg('--keys-max') ?? 10_000);
  const child = arg('--child');
  if (child) {
    const result = await runSize(Number(child), { queries, httpMax, keysMax });
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const fromJson = arg('--from-json');
  if (fromJson) {
    // The per-size JSON lines a run printed to stderr (one size's figures as soon as it is done): the report again.
    const saved = readFileSync(fromJson, 'utf8').split('\n').filter((line) => line.startsWith('{"size"')).map((line) => JSON.parse(line) as SizeResult);
    const section = report(saved, `npm run bench -- --sizes ${saved.map((r) => r.size).join(',')}`, Number(arg('--seconds') ?? NaN), [saved[0]!.load[0], saved.at(-1)!.load[1]]);
    process.stdout.write(`${section}\n`);
    if (!process.argv.includes('--no-write')) writeBenchmarks(section);
    return;
  }
  const sizes = (arg('--sizes') ?? (quick ? '1000' : '1000,10000,100000')).split(',').map((s) => Number(s.replace(/_/g, '')));
  const passthrough = ['--queries', String(queries), '--http-max', String(httpMax), '--keys-max', String(keysMax)];
  const started = performance.now();
  const loadAtStart = os.loadavg()[0]!;
  const results: SizeResult[] = [];
  for (const size of sizes) {
    process.stderr.write(`bench: ${size} tools…\n`);
    const result = await runChild(size, passthrough);
    process.stderr.write(`bench: ${size} tools done (build ${ms(result.buildColdMs)} ms, hybrid p50 ${ms(result.inProcess.hybrid!.p50)} ms)\n`);
    // Each size's figures as soon as they exist, so a long run that is stopped still leaves its numbers.
    process.stderr.write(`${JSON.stringify(result)}\n`);
    results.push(result);
  }
  const command = ['npm run bench', ...(process.argv.slice(2).length ? ['--', ...process.argv.slice(2)] : [])].join(' ');
  let section = report(results, command, (performance.now() - started) / 1000, [loadAtStart, os.loadavg()[0]!]);
  // What a shared conversation store adds to a proxied turn (issue 47): needs a Redis (REDIS_URL, default local).
  if (!process.argv.includes('--no-redis')) {
    process.stderr.write('bench: conversation store, memory against Redis…\n');
    const store = await runNode([path.join(ROOT, 'bench/conversation-store.ts'), quick ? '100' : '300'], [], true).catch((error: unknown) => `not measured: ${(error as Error).message} (is Redis running? --no-redis skips this)`);
    section += `\n\n### Conversations in Redis (\`bench/conversation-store.ts\`)\n\n${store}\n`;
  }
  // What policies (100), the secret guardrail and an audit record add to a call, and the policy part of a search (issue 53).
  process.stderr.write('bench: governance…\n');
  const governance = await runNode([path.join(ROOT, 'bench/governance.ts'), quick ? '1000' : '3000'], [], true).catch((error: unknown) => `not measured: ${(error as Error).message}`);
  section += `\n\n### Governance (\`bench/governance.ts\`)\n\n${governance}\n`;
  // A 100,000-tool catalog PUT to the service as `npm start` runs it (issue 55), when the run includes 100k.
  if (sizes.includes(100_000)) {
    process.stderr.write('bench: a 100,000-tool PUT to `npm start`…\n');
    const line = await runNode([path.join(ROOT, 'bench/large-put.ts'), '100000']).catch((error: unknown) => `not measured: ${(error as Error).message}`);
    section += `\n\n${largePutReport(line)}\n`;
  }
  process.stdout.write(`${section}\n`);
  if (!process.argv.includes('--no-write') && !quick) writeBenchmarks(section);
  else process.stderr.write('bench: BENCHMARKS.md not written (--quick or --no-write)\n');
}

await main();
