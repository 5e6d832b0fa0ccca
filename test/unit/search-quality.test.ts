import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import type { LabelledQuery } from '../../src/catalog/types.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { loadCatalogFile, loadQueries } from '../../src/eval/datasets.js';
import { loadConfig } from '../../src/config/config.js';
import { createEngine } from '../../src/eval/engine.js';
import { evaluate, type EvalResult } from '../../src/eval/metrics.js';
import type { SearchMode } from '../../src/search/search.js';

/**
 * Retrieval quality on the project's own labelled fixture, with the real offline model and the default settings.
 * These are the claims the product rests on: each signal finds tools the other misses, so fusing them beats either.
 */
describe('search quality on the labelled fixture', () => {
  let queries: LabelledQuery[];
  const results = new Map<SearchMode, EvalResult>();
  const topFive = new Map<SearchMode, Map<string, string[]>>();

  before(async () => {
    const engine = await createEngine(loadCatalogFile(path.join(REPO_ROOT, 'test/fixtures/catalog.json')), { config: loadConfig({}) });
    queries = loadQueries(path.join(REPO_ROOT, 'test/fixtures/queries.jsonl'));
    for (const mode of ['bm25', 'vector', 'hybrid'] as const) {
      const seen = new Map<string, string[]>();
      const rank = async (query: string) => {
        const names = (await engine.search.search({ query, mode, topK: 10 })).results.map((hit) => hit.tool.name);
        seen.set(query, names.slice(0, 5));
        return names;
      };
      results.set(mode, await evaluate(rank, queries));
      topFive.set(mode, seen);
    }
  });

  const hitAt5 = (mode: SearchMode, { query, expected }: LabelledQuery) =>
    topFive.get(mode)!.get(query)!.some((name) => expected.includes(name));

  it('each signal finds tools the other misses', () => {
    const onlyVector = queries.filter((query) => hitAt5('vector', query) && !hitAt5('bm25', query));
    const onlyLexical = queries.filter((query) => hitAt5('bm25', query) && !hitAt5('vector', query));
    assert.ok(onlyVector.length > 0, 'no query where vectors find what BM25 misses');
    assert.ok(onlyLexical.length > 0, 'no query where BM25 finds what vectors miss');
  });

  it('hybrid beats BM25 alone and vectors alone on MRR and Recall@5', () => {
    const bm25 = results.get('bm25')!;
    const vector = results.get('vector')!;
    const hybrid = results.get('hybrid')!;
    const summary = JSON.stringify(Object.fromEntries(results));
    assert.ok(hybrid.mrr > bm25.mrr && hybrid.mrr > vector.mrr, `MRR ${summary}`);
    assert.ok(hybrid.recallAt5 > bm25.recallAt5 && hybrid.recallAt5 > vector.recallAt5, `Recall@5 ${summary}`);
  });
});
