/**
 * What the offline default model costs, as the README's "Embedding models" section quotes it: build time and size on
 * disk, memory once loaded, embedding LiveMCPBench's tools (as the indexer embeds them) and a query.
 *
 *   node --import tsx bench/offline-model.ts [--runs 5]
 *
 * Builds into a temporary directory (the model under models/ is left alone). Prints one line per figure.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { embeddingText, searchableText } from '../src/catalog/text.js';
import { createEmbedder, OFFLINE_MODEL_ID } from '../src/embedding/embedder.js';
import { buildOfflineModel, directorySize } from '../src/embedding/offline/build.js';
import { loadLiveMcpBench } from '../src/eval/datasets.js';
import { REPO_ROOT } from '../test/helpers/paths.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, 'load-only': { type: 'string' } } });
const runs = Math.max(1, Number(values.runs));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function load(modelsDir: string) {
  const embedder = await createEmbedder({ provider: 'transformers', model: OFFLINE_MODEL_ID, modelsDir, allowRemoteModels: false });
  await embedder.embed(['warm up']);
  return embedder;
}

if (values['load-only']) {
  const before = process.memoryUsage().rss;
  await load(values['load-only']);
  console.log(`${((process.memoryUsage().rss - before) / 1e6).toFixed(0)} MB RSS`);
  process.exit(0);
}

const modelsDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-offline-bench-'));
try {
  const modelDir = path.join(modelsDir, OFFLINE_MODEL_ID);
  const buildStarted = performance.now();
  await buildOfflineModel(modelDir, { progress: 'silent' });
  console.log(`build: ${((performance.now() - buildStarted) / 1000).toFixed(1)} s`);
  console.log(`on disk: ${((await directorySize(modelDir)) / 2 ** 20).toFixed(1)} MB (MiB, as the build reports it)`);

  // In a fresh process, so the build's garbage is not counted (or subtracted).
  const loaded = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--load-only', modelsDir], { encoding: 'utf8' });
  console.log(`memory once loaded: ${loaded.stdout.trim() || loaded.stderr.trim()}`);

  const embedder = await load(modelsDir);

  const tools = loadLiveMcpBench(path.join(REPO_ROOT, '../shared/datasets/livemcpbench/tools.json'));
  const texts = tools.map((tool) => embeddingText(searchableText(tool)));
  const chars = texts.reduce((sum, text) => sum + text.length, 0) / texts.length;
  const times: number[] = [];
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    await embedder.embed(texts);
    times.push(performance.now() - started);
  }
  console.log(`${texts.length} LiveMCPBench tools (${chars.toFixed(0)} characters each on average): median ${median(times).toFixed(0)} ms of ${runs} runs (${times.map((t) => t.toFixed(0)).join(', ')})`);

  const queries = texts.slice(0, 200).map((text) => text.split(' ').slice(0, 8).join(' '));
  for (const query of queries.slice(0, 20)) await embedder.embed([query], { role: 'query' });
  const queryStarted = performance.now();
  for (const query of queries) await embedder.embed([query], { role: 'query' });
  console.log(`a query (8 words): ${((performance.now() - queryStarted) / queries.length).toFixed(3)} ms`);
  console.log(`vectors: ${((embedder.dimensions * 4 * 1000) / 1000).toFixed(0)} KB per 1,000 tools (${embedder.dimensions} dimensions x 4 bytes)`);
} finally {
  rmSync(modelsDir, { recursive: true, force: true });
}
