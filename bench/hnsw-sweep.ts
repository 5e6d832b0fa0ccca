/**
 * `node --import tsx bench/hnsw-sweep.ts [size] [efConstruction,...] [efSearch,...] [m]`
 *
 * How HNSW settings trade build time for recall on a bench catalog (bench/catalog.ts) embedded with the offline
 * model: for each efConstruction, the construction time, and for each efSearch, recall@10 against the exact scan and
 * the time per search. Queries: the labelled fixture queries plus every ~1/100th tool's own vector, slightly moved
 * (a query that is almost a catalog entry, as a good paraphrase is). This is how DEFAULT_HNSW was chosen.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Catalog } from '../src/catalog/catalog.js';
import { embeddingText } from '../src/catalog/text.js';
import { loadConfig } from '../src/config/config.js';
import { createEmbedder } from '../src/embedding/embedder.js';
import { loadQueries } from '../src/eval/datasets.js';
import { DEFAULT_HNSW, ExactVectorIndex, HnswVectorIndex } from '../src/indexing/vector.js';
import { generateCatalog } from './catalog.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const size = Number(process.argv[2] ?? 100_000);
const efConstructions = (process.argv[3] ?? '200,100').split(',').map(Number);
const efSearches = (process.argv[4] ?? '64,128,256,512').split(',').map(Number);
const m = Number(process.argv[5] ?? DEFAULT_HNSW.m);

const config = loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent' });
const embedder = await createEmbedder({ ...config.embedding });
const catalog = new Catalog({ separator: config.catalog.separator });
catalog.setSource('bench', generateCatalog(size));
const entries = catalog.snapshot().entries;
const names = entries.map((entry) => entry.tool.name);
const vectors = await embedder.embed(entries.map((entry) => embeddingText(entry.text)));

const texts = ['test/fixtures/livemcpbench-queries.jsonl', 'test/fixtures/queries.jsonl'].flatMap((file) =>
  loadQueries(path.join(ROOT, file)).map((query) => query.query),
);
const step = Math.max(1, Math.floor(size / 100));
const nearEntries = vectors
  .filter((_, i) => i % step === 7)
  .map((vector) => {
    const moved = vector.map((value, d) => value + (d % 3 === 0 ? 0.05 : 0));
    const norm = Math.hypot(...moved);
    return moved.map((value) => value / norm);
  });
const queries = [...(await embedder.embed(texts)), ...nearEntries];
const exact = new ExactVectorIndex(names, vectors);
const truth = queries.map((query) => new Set(exact.search(query, 10).map((hit) => hit.name)));

process.stdout.write(`${size} tools, ${queries.length} queries, M ${m}\n| efConstruction | build | efSearch | recall@10 | ms per search |\n| --- | --- | --- | --- | --- |\n`);
for (const efConstruction of efConstructions) {
  const started = performance.now();
  const graph = HnswVectorIndex.build(names, vectors, { ...DEFAULT_HNSW, m, efConstruction });
  const buildMs = performance.now() - started;
  for (const efSearch of efSearches) {
    const index = new HnswVectorIndex(names, graph.index, efSearch);
    let found = 0;
    const searchStarted = performance.now();
    queries.forEach((query, i) => {
      found += index.search(query, 10).filter((hit) => truth[i]!.has(hit.name)).length;
    });
    const perSearch = (performance.now() - searchStarted) / queries.length;
    process.stdout.write(`| ${efConstruction} | ${(buildMs / 1000).toFixed(1)} s | ${efSearch} | ${(found / (queries.length * 10)).toFixed(3)} | ${perSearch.toFixed(3)} |\n`);
  }
}
