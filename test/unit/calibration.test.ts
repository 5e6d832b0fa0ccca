/**
 * Calibrated scores and the abstention split they are fitted on, with real parts: the fixture catalog, the real
 * offline embedder, the real indexes. The only stand-in is an embeddings provider that fails, to force the BM25 fallback.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { createEmbedder, type Embedder } from '../../src/embedding/embedder.js';
import { abstentionSplit, atThreshold, auc, fitModel, serverUnits, thresholdKeeping, type QueryHits } from '../../src/eval/calibrate.js';
import { loadCatalogSources, loadQueries } from '../../src/eval/datasets.js';
import { DEFAULT_CALIBRATION, type RelevanceFeatures } from '../../src/search/calibration.js';
import { describeCoverage } from '../../src/search/coverage.js';
import { searchToolDefinition } from '../../src/chat/core/search-tool.js';
import { chatDialect } from '../../src/chat/openai-chat/dialect.js';
import { responsesDialect } from '../../src/chat/openai-responses/dialect.js';
import type { RequestTool } from '../../src/chat/core/tool-request.js';
import { countTokens } from 'gpt-tokenizer';
import { createFixedSearch, type FixedSearch } from '../../src/search/fixed.js';
import { DEFAULT_SEARCH_SETTINGS, SearchService } from '../../src/search/search.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { fixtureTools } from '../helpers/router.js';
import { loadConfig } from '../../src/config/config.js';

const fixtures = path.join(REPO_ROOT, 'test/fixtures');

describe('calibrated scores', () => {
  let embedder: Embedder;
  let stack: FixedSearch;
  before(async () => {
    embedder = await createEmbedder(loadConfig({ TOOLROUTER_CONFIG: '' }).embedding);
    stack = await createFixedSearch(fixtureTools(), { embedder });
  });

  it('are in [0, 1], non-increasing down the list, in every ranked mode', async () => {
    for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
      const { results } = await stack.search.search({ query: 'send an email to a colleague', mode, topK: 10, minScore: 0 });
      const scores = results.map((hit) => hit.score);
      assert.ok(scores.length > 0, mode);
      assert.ok(scores.every((score) => score >= 0 && score <= 1), `${mode}: ${scores.join()}`);
      assert.deepEqual(scores, [...scores].sort((a, b) => b - a), mode);
    }
  });

  it('the BM25 fallback scores exactly as bm25 mode does (one scale), and says it fell back', async () => {
    const failing: Embedder = {
      modelId: embedder.modelId,
      cacheKey: embedder.cacheKey,
      dimensions: embedder.dimensions,
      embed: async () => {
        throw new Error('provider down');
      },
    };
    // The same catalog and index, searched by a service whose embeddings provider fails.
    const down = new SearchService({ catalog: stack.catalog, indexes: stack.indexes, embedder: failing, settings: DEFAULT_SEARCH_SETTINGS });
    const fallback = await down.search({ query: 'create a pull request', topK: 5, minScore: 0 });
    const bm25 = await stack.search.search({ query: 'create a pull request', mode: 'bm25', topK: 5, minScore: 0 });
    assert.equal(fallback.fallback?.reason, 'embedding_error');
    assert.deepEqual(
      fallback.results.map((hit) => [hit.tool.name, hit.score]),
      bm25.results.map((hit) => [hit.tool.name, hit.score]),
    );
    assert.ok(fallback.results[0]!.score <= 1 && fallback.results[0]!.scores.bm25! > 1, 'score is calibrated, scores.bm25 raw');
  });

  it('the default min_score turns away a query of unknown words and keeps an answered one', async () => {
    assert.ok(DEFAULT_SEARCH_SETTINGS.minScore! > 0);
    const none = await stack.search.search({ query: 'qzxv blorfing', minScore: DEFAULT_SEARCH_SETTINGS.minScore! });
    assert.deepEqual(none.results, []);
    const some = await stack.search.search({ query: 'create a pull request', minScore: DEFAULT_SEARCH_SETTINGS.minScore! });
    assert.equal(some.results[0]?.tool.name, 'github__create_pull_request');
    assert.ok((some.matched ?? 0) >= some.results.length);
  });
});

describe('abstention split and its metrics', () => {
  const sources = loadCatalogSources(path.join(fixtures, 'catalog.json'), { descriptions: path.join(fixtures, 'sources.json') });
  const queries = loadQueries(path.join(fixtures, 'queries.jsonl'));

  it('reads the fixture as described servers, and splits them in two disjoint halves', () => {
    const units = serverUnits(sources);
    assert.equal(units.length, 15);
    assert.match(units.find((unit) => unit.source === 'stripe')!.description!, /payments/);
    const [a, b] = [abstentionSplit(units, queries, 0), abstentionSplit(units, queries, 1)];
    const keptA = new Set(a.kept.map((unit) => unit.source));
    assert.ok(b.kept.every((unit) => !keptA.has(unit.source)));
    assert.equal(a.kept.length + b.kept.length, units.length);
    const namesA = new Set(a.kept.flatMap((unit) => unit.tools.map((tool) => tool.name)));
    assert.ok(a.answerable.every((query) => query.expected.some((name) => namesA.has(name))));
    assert.ok(a.unanswerable.every((query) => query.expected.every((name) => !namesA.has(name))));
    assert.equal(a.answerable.length + a.unanswerable.length + b.answerable.length + b.unanswerable.length, queries.length);
  });

  it('AUC, thresholds and shares are computed as defined', () => {
    assert.equal(auc([0.9, 0.8, 0.1, 0.2], [true, true, false, false]), 1);
    assert.equal(auc([0.5, 0.5], [true, false]), 0.5);
    assert.equal(auc([0.1, 0.9], [true, false]), 0);
    const scores = Array.from({ length: 20 }, (_, i) => (i + 1) / 20);
    const positive = scores.map(() => true);
    // 95% of 20 answerable: 19 kept, so the threshold is the 19th best score.
    assert.equal(thresholdKeeping(scores, positive), 0.1);
    assert.deepEqual(atThreshold([0.2, 0.05, 0.3, 0.01], [true, true, false, false], 0.1), { kept: 0.5, turnedAway: 0.5 });
  });

  it('fits a logistic model that orders by the signal that separates', () => {
    const feature = (coverage: number): RelevanceFeatures => ({ coverage, bm25Relative: 1, bm25Log: 1, cosine: 0, cosineMargin: 0, ranking: 0.5, lead: 0.1, reciprocalRank: 1, feedback: 0 });
    const hits: QueryHits[] = [];
    for (let i = 0; i < 40; i++) {
      const coverage = i / 40;
      // Overlapping classes, so the fit is finite: relevant mostly at high coverage.
      hits.push({ answerable: true, features: [feature(coverage)], relevant: [i % 4 !== 0 ? coverage > 0.4 : coverage <= 0.4], rawTop: 0 });
    }
    const model = fitModel(hits, 'bm25');
    assert.ok(model.weights.coverage > 0, JSON.stringify(model));
    assert.equal(model.weights.cosine, 0, 'bm25 models read no cosine');
  });

  it('fits no negative weight: less evidence never scores higher (issue 42)', () => {
    // lead rises with relevance; bm25Log is higher on the wrong hits. Unconstrained, the fit gives bm25Log a negative
    // weight, so a hit BM25 did not return (bm25Log 0) would score above one it did.
    const feature = (lead: number, bm25Log: number): RelevanceFeatures => ({ coverage: 0, bm25Relative: 0, bm25Log, cosine: 0, cosineMargin: 0, ranking: 0, lead, reciprocalRank: 1, feedback: 0 });
    const hits: QueryHits[] = [];
    for (let i = 0; i < 60; i++) {
      const relevant = i % 3 !== 0 ? i >= 30 : i < 30;
      hits.push({ answerable: true, features: [feature(i / 60, relevant ? 1 : 3)], relevant: [relevant], rawTop: 0 });
    }
    const model = fitModel(hits, 'bm25');
    for (const [name, weight] of Object.entries(model.weights)) assert.ok(weight >= 0, `${name} ${weight}: ${JSON.stringify(model)}`);
    assert.equal(model.weights.bm25Log, 0);
    assert.ok(model.weights.lead > 0, JSON.stringify(model));
    for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
      for (const [name, weight] of Object.entries(DEFAULT_CALIBRATION[mode].weights)) assert.ok(weight >= 0, `shipped ${mode} ${name} ${weight}`);
    }
  });

  it('the shipped models read only their mode\'s signals', () => {
    assert.equal(DEFAULT_CALIBRATION.bm25.weights.cosine, 0);
    assert.equal(DEFAULT_CALIBRATION.bm25.weights.cosineMargin, 0);
    assert.equal(DEFAULT_CALIBRATION.vector.weights.coverage, 0);
  });
});

describe('coverage text', () => {
  it("the chat proxy's search tool names the request's servers and their tool counts", () => {
    const tool = (name: string) => ({ definition: { type: 'function', function: { name } }, function: { name, parameters: { type: 'object' } } }) as RequestTool;
    const definition = searchToolDefinition(chatDialect, 'find_tools', [tool('github__create_issue'), tool('github__list_prs'), tool('slack__post')]) as {
      function: { description: string };
    };
    assert.match(definition.function.description, /Searches 3 tools of 2 servers:\n- github \(2\)\n- slack \(1\)$/);
    const bare = searchToolDefinition(responsesDialect, 'find_tools') as { description: string };
    assert.doesNotMatch(bare.description, /Searches/);
  });

  it('lists each server with summary and count; past the token bound, names and counts; past that, "N more"', () => {
    const few = [
      { name: 'github', tools: 6, description: 'GitHub code hosting: repositories, issues. And more.' },
      { name: 'slack', tools: 5 },
    ];
    assert.equal(describeCoverage(few), 'Searches 11 tools of 2 servers:\n- github (6): GitHub code hosting: repositories, issues.\n- slack (5)');
    const many = Array.from({ length: 60 }, (_, i) => ({ name: `server${i}`, tools: i + 1, description: 'A server with a fairly long description of everything it does for you' }));
    const grouped = describeCoverage(many);
    assert.ok(countTokens(grouped) <= 400, `${countTokens(grouped)} tokens`);
    assert.match(grouped, /server59 \(60\)/);
    assert.doesNotMatch(grouped, /fairly long/);
    const huge = Array.from({ length: 2_000 }, (_, i) => ({ name: `s${i}`, tools: 1 + (i % 7) }));
    const counted = describeCoverage(huge);
    assert.ok(countTokens(counted) <= 400, `${countTokens(counted)} tokens`);
    assert.match(counted, /and \d+ more\.$/);
  });
});
