/**
 * What a catalog costs in Redis: a private, empty redis-server (OS-picked port, removed afterwards), one API instance
 * and one worker process; PUT a catalog of N tools (bench/catalog.ts, realistic definitions), wait for the build, then
 * read INFO memory and MEMORY USAGE per key family. Prints a markdown table for README "Redis in production".
 *   node --import tsx bench/redis-memory.ts [tools]      (default 10000)
 */
import { Redis } from 'ioredis';
import { eventually, WorkerProcess, writeConfig } from '../test/helpers/processes.js';
import { PrivateRedis } from '../test/helpers/redis-server.js';
import { startRouter } from '../test/helpers/router.js';
import { generateCatalog } from './catalog.js';

const count = Number(process.argv[2] ?? 10_000);
const prefix = 'toolrouter';

/** Key families by what they hold; the first pattern that matches names the family. */
const FAMILIES: [string, RegExp][] = [
  ['embedding cache (vectors, may be volatile)', new RegExp(`^${prefix}:emb:`)],
  ['index artifact (current + previous)', new RegExp(`^${prefix}:index:[^:]+:[0-9a-f]{64}$`)],
  ['catalog snapshots', new RegExp(`^${prefix}:catalog:[0-9a-f]{64}$`)],
  ['static sources (the PUT catalogs)', new RegExp(`^${prefix}:sources$`)],
  ['BullMQ queue', /^bull:/],
  ['everything else (pointers, counters, keys, settings)', /./],
];

async function main(): Promise<void> {
  const server = new PrivateRedis();
  await server.start();
  const redis = new Redis(server.url);
  const settings = { redis: { url: server.url }, queue: { prefix } };
  const worker = new WorkerProcess(writeConfig({ ...settings, logLevel: 'info' }));
  try {
    await worker.ready();
    const api = await startRouter(settings);
    const baseline = await usedMemory(redis);
    const put = await api.request('PUT', '/v1/catalog/sources/bench', { tools: generateCatalog(count) });
    if (put.status !== 200) throw new Error(`PUT failed: ${put.status} ${JSON.stringify(put.body)}`);
    await eventually(async () => (await api.request('GET', '/v1/index/status')).body, (status) => status.indexedHash === put.body.catalogHash, 900_000);
    await api.close();
    const used = (await usedMemory(redis)) - baseline;
    const totals = new Map<string, { keys: number; bytes: number }>();
    for await (const batch of redis.scanStream({ count: 1000 })) {
      for (const key of batch as string[]) {
        const family = FAMILIES.find(([, pattern]) => pattern.test(key))![0];
        const bytes = Number(await redis.memory('USAGE', key, 'SAMPLES', '0'));
        const total = totals.get(family) ?? { keys: 0, bytes: 0 };
        totals.set(family, { keys: total.keys + 1, bytes: total.bytes + bytes });
      }
    }
    const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(2);
    console.log(`| ${count.toLocaleString('en')} tools | keys | MB |`);
    console.log('| --- | ---: | ---: |');
    for (const [family] of FAMILIES) {
      const total = totals.get(family);
      if (total) console.log(`| ${family} | ${total.keys.toLocaleString('en')} | ${mb(total.bytes)} |`);
    }
    const sum = [...totals.values()].reduce((a, b) => a + b.bytes, 0);
    console.log(`| **sum of MEMORY USAGE** | | **${mb(sum)}** |`);
    console.log(`| INFO memory used_memory, after minus before | | ${mb(used)} |`);
  } finally {
    await worker.kill('SIGTERM');
    redis.disconnect();
    await server.stop();
  }
}

async function usedMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1]);
}

await main();
process.exit(0);
