/**
 * Rebuild timings through the shared pipeline: one API instance, one worker process, the Redis at REDIS_URL (default
 * 127.0.0.1:6379, under a key prefix of its own, removed afterwards). Prints a markdown table for BENCHMARKS.md.
 *   node --import tsx bench/rebuild.ts [sizes...]      (default 1000 10000)
 */
import { Redis } from 'ioredis';
import { eventually, REDIS_URL, WorkerProcess, writeConfig } from '../test/helpers/processes.js';
import { startRouter, type RunningRouter } from '../test/helpers/router.js';
import { syntheticTools } from '../test/helpers/synthetic.js';

interface Row {
  catalog: string;
  searchableMs: number;
  build?: { durationMs?: number; embedded?: number; bytes?: number };
}

const sizes = process.argv.slice(2).map(Number).filter((size) => size > 0);
const prefix = `rebuild-bench-${process.pid}`;
const settings = { redisUrl: REDIS_URL, queue: { prefix } };

/** PUT → the API's index status shows the new catalog indexed; plus the worker's own report of that build. */
async function timePut(api: RunningRouter, worker: WorkerProcess, tools: unknown[], label: string): Promise<Row> {
  const before = worker.logs.length;
  const started = performance.now();
  const put = await api.request('PUT', '/v1/catalog/sources/bench', { tools });
  if (put.status !== 200) throw new Error(`PUT failed: ${put.status} ${JSON.stringify(put.body)}`);
  await eventually(
    async () => (await api.request('GET', '/v1/index/status')).body,
    (status) => status.indexedHash === put.body.catalogHash,
    600_000,
  );
  const searchableMs = performance.now() - started;
  const built = worker.logs
    .slice(before)
    .find((line) => line.msg === 'index build finished' && line.outcome === 'built' && String(line.jobId).includes(put.body.catalogHash));
  return { catalog: label, searchableMs, build: built as Row['build'] };
}

async function main(): Promise<void> {
  const worker = new WorkerProcess(writeConfig({ ...settings, logLevel: 'info' }));
  await worker.ready();
  const api = await startRouter(settings);
  const rows: Row[] = [];
  try {
    for (const size of sizes.length > 0 ? sizes : [1_000, 10_000]) {
      const tools = syntheticTools(size, `bench${size}`);
      rows.push(await timePut(api, worker, tools, `${size.toLocaleString('en')} tools, cold cache`));
      const changed = tools.map((tool, i) => (i === 0 ? { ...tool, description: `${tool.description} Changed.` } : tool));
      rows.push(await timePut(api, worker, changed, `${size.toLocaleString('en')} tools, one tool changed`));
    }
  } finally {
    await api.close();
    await worker.kill('SIGTERM');
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`*${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  }
  console.log('| catalog | PUT→searchable | worker build | texts embedded | artifact |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const row of rows) {
    const mb = row.build?.bytes === undefined ? '?' : `${(row.build.bytes / 1e6).toFixed(1)} MB`;
    console.log(`| ${row.catalog} | ${Math.round(row.searchableMs).toLocaleString('en')} ms | ${Math.round(row.build?.durationMs ?? NaN).toLocaleString('en')} ms | ${(row.build?.embedded ?? NaN).toLocaleString('en')} | ${mb} |`);
  }
}

await main();
