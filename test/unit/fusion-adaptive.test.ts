import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { DATASETS_DIR, REPO_ROOT } from '../helpers/paths.js';
import { loadCatalogFile, loadQueries } from '../../src/eval/datasets.js';
import { createEngine } from '../../src/eval/engine.js';
import { evaluate, type EvalResult } from '../../src/eval/metrics.js';
import { adaptiveWeights, DEFAULT_ADAPTIVE_FUSION } from '../../src/search/fusion.js';

const hits = (...scores: number[]) => scores.map((score, i) => ({ name: `t${i}`, score }));
const base = { bm25: 0.55, vector: 0.45 };

describe('adaptive fusion weights', () => {
  it('keeps the vector weight when the first cosine stands clear of the tenth, and drops it on a flat top', () => {
    // (c1 - c10) / (1 - c10): 0.9 vs 0.5 → 0.8, well over the 0.3 margin: full weight.
    assert.deepEqual(adaptiveWeights(hits(0.9, 0.7, 0.6, 0.6, 0.6, 0.55, 0.55, 0.5, 0.5, 0.5), base, DEFAULT_ADAPTIVE_FUSION), base);
    // 0.62 vs 0.6 → 0.05: a sixth of the weight.
    const flat = adaptiveWeights(hits(0.62, 0.61, 0.61, 0.61, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6), base, DEFAULT_ADAPTIVE_FUSION);
    assert.equal(flat.bm25, 0.55);
    assert.ok(Math.abs(flat.vector - 0.45 * (0.02 / 0.4 / 0.3)) < 1e-9, String(flat.vector));
    // All tied: the model cannot tell the candidates apart at all.
    assert.equal(adaptiveWeights(hits(...new Array(10).fill(0.4)), base, DEFAULT_ADAPTIVE_FUSION).vector, 0);
  });

  it('leaves weights alone with fewer than ten candidates, a vector-only request, or when disabled', () => {
    const few = hits(0.5, 0.5, 0.5);
    assert.deepEqual(adaptiveWeights(few, base, DEFAULT_ADAPTIVE_FUSION), base);
    const flat = hits(...new Array(10).fill(0.4));
    assert.deepEqual(adaptiveWeights(flat, { bm25: 0, vector: 1 }, DEFAULT_ADAPTIVE_FUSION), { bm25: 0, vector: 1 });
    assert.deepEqual(adaptiveWeights(flat, base, { ...DEFAULT_ADAPTIVE_FUSION, enabled: false }), base);
  });

  it('is configurable and on by default', () => {
    assert.deepEqual(loadConfig({}).search.adaptive, DEFAULT_ADAPTIVE_FUSION);
    assert.equal(loadConfig({}, { search: { adaptive: { vectorMargin: 0.5 } } }).search.adaptive.vectorMargin, 0.5);
  });
});

/**
 * The rule's claim on data: hybrid at least as good as the better single signal (Recall@5 and MRR), and no worse than
 * static weights. On the fixture, and on LiveMCPBench with its labelled queries when the shared datasets are present.
 */
const sets = [
  { name: 'fixture', catalog: path.join(REPO_ROOT, 'test/fixtures/catalog.json'), queries: path.join(REPO_ROOT, 'test/fixtures/queries.jsonl') },
  {
    name: 'LiveMCPBench',
    catalog: path.join(DATASETS_DIR, 'livemcpbench', 'tools.json'),
    queries: path.join(REPO_ROOT, 'test/fixtures/livemcpbench-queries.jsonl'),
  },
];

describe('adaptive fusion on labelled data', () => {
  for (const set of sets) {
    it(`${set.name}: hybrid >= max(bm25, vector) at R@5 and MRR, and >= static weights`, { skip: existsSync(set.catalog) ? false : `${set.catalog} not found` }, async () => {
      const tools = loadCatalogFile(set.catalog);
      const queries = loadQueries(set.queries);
      const adaptive = await createEngine(tools, { config: loadConfig({ TOOLROUTER_CONFIG: '' }) });
      const staticConfig = loadConfig({ TOOLROUTER_CONFIG: '' }, { search: { adaptive: { enabled: false } } });
      const fixed = await createEngine(tools, { config: staticConfig, embedder: adaptive.embedder });
      const run = async (engine: typeof adaptive, mode: 'bm25' | 'vector' | 'hybrid'): Promise<EvalResult> =>
        evaluate(async (query) => (await engine.search.search({ query, mode, topK: 10 })).results.map((hit) => hit.tool.name), queries);
      const bm25 = await run(adaptive, 'bm25');
      const vector = await run(adaptive, 'vector');
      const hybrid = await run(adaptive, 'hybrid');
      const before = await run(fixed, 'hybrid');
      const summary = JSON.stringify({ bm25, vector, hybrid, before });
      assert.ok(hybrid.recallAt5 >= Math.max(bm25.recallAt5, vector.recallAt5), summary);
      assert.ok(hybrid.mrr >= Math.max(bm25.mrr, vector.mrr), summary);
      assert.ok(hybrid.mrr >= before.mrr && hybrid.recallAt5 >= before.recallAt5, summary);
    });
  }
});
