import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { createEmbedder, type Embedder } from '../../src/embedding/embedder.js';
import { FeedbackService } from '../../src/feedback/service.js';
import { MemoryFeedbackStore } from '../../src/feedback/store.js';
import { createFixedSearch, type FixedSearch } from '../../src/search/fixed.js';
import type { SearchRequest, SearchResponse } from '../../src/search/search.js';
import { InvalidWeightsError, mergeWeights } from '../../src/search/weights.js';
import { fixtureTools } from '../helpers/router.js';

const PINNED = ['fs__read_file', 'slack__post_message'];
const QUERIES = ['read the contents of config.yaml', 'post a message to the team channel', 'create a GitHub issue', 'regex:^fs__', 'select:fs__write_file,fs__read_file'];
const SETTINGS: Pick<SearchRequest, 'weights' | 'fusion' | 'topK'>[] = [
  {},
  { weights: { bm25: 1, vector: 0 }, fusion: 'weighted' },
  { weights: { bm25: 0, vector: 1 }, fusion: 'rrf' },
  { weights: { bm25: 0.3, vector: 0.7, feedback: 2 }, fusion: 'weighted', topK: 3 },
  { weights: { bm25: 0.5, vector: 0.5, feedback: 0 }, fusion: 'rrf', topK: 20 },
];

const names = (response: SearchResponse) => response.results.map((hit) => `${hit.tool.name}:${hit.score.toFixed(6)}`);

describe('SearchService.prepare ranks as search does', () => {
  const config = loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent', search: { pinned: PINNED } });
  let embedder: Embedder;
  let fixed: FixedSearch;

  before(async () => {
    embedder = await createEmbedder(config.embedding);
    const settings = { ...config.feedback, enabled: true };
    const feedback = new FeedbackService(embedder, new MemoryFeedbackStore(settings), settings);
    fixed = await createFixedSearch(fixtureTools(), { embedder, settings: config.search, feedback, lexical: config.search.lexical, hnsw: config.search.hnsw });
    // Feedback that moves a tool: the feedback weight must change rankings for the settings above to differ.
    for (let i = 0; i < 4; i++) await feedback.record({ query: 'create a GitHub issue', tool: 'github__list_issues', relevant: true, surface: 'rest' });
  });

  it('for every query, mode and setting, with and without a visibility filter', async () => {
    const visibleRequests: Partial<SearchRequest>[] = [{}, { visible: (entry) => !entry.tool.name.startsWith('github__'), visibilityKey: 'no-github' }];
    let differing = 0;
    for (const query of QUERIES) {
      for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
        for (const visible of visibleRequests) {
          const request: SearchRequest = { query, mode, ...visible };
          const prepared = await fixed.search.prepare(request);
          const seen = new Set<string>();
          for (const setting of SETTINGS) {
            const expected = await fixed.search.search({ ...request, ...setting });
            const actual = await prepared.rank(setting);
            assert.deepEqual(names(actual), names(expected), `${query} ${mode} ${JSON.stringify(setting)}`);
            // select: names tools outright, pinned or not; every ranking leaves pinned tools out.
            if (!query.startsWith('select:')) assert.ok(!actual.results.some((hit) => PINNED.includes(hit.tool.name)), 'pinned tools are never ranked');
            seen.add(names(actual).join());
          }
          if (seen.size > 1) differing++;
        }
      }
    }
    assert.ok(differing > 10, 'the settings must rank differently for the comparison to mean anything');
  });

  it('falls back to BM25 exactly as search does when the query cannot be embedded', async () => {
    const failing: Embedder = {
      modelId: embedder.modelId,
      cacheKey: embedder.cacheKey,
      dimensions: embedder.dimensions,
      embed: (texts, options) => (options?.role === 'query' ? Promise.reject(new Error('provider down')) : embedder.embed(texts, options)),
    };
    const broken = await createFixedSearch(fixtureTools(), { embedder: failing, settings: config.search });
    const prepared = await broken.search.prepare({ query: 'create a GitHub issue', mode: 'hybrid' });
    for (const setting of SETTINGS) {
      const expected = await broken.search.search({ query: 'create a GitHub issue', mode: 'hybrid', ...setting });
      const actual = await prepared.rank(setting);
      assert.deepEqual(names(actual), names(expected));
      assert.deepEqual(actual.fallback, expected.fallback);
    }
    // bm25 alone needs no embedding: no fallback there, in either path.
    assert.equal((await prepared.rank({ weights: { bm25: 1, vector: 0 } })).fallback, undefined);
  });
});

describe('weights: one rule', () => {
  it('merges over the current weights, and names what is wrong as a 400', () => {
    assert.deepEqual(mergeWeights({ bm25: 0.5, vector: 0.5 }, { vector: 0 }), { bm25: 0.5, vector: 0 });
    for (const [update, message] of [
      [{ bm25: 0, vector: 0 }, /at least one of bm25 and vector must be positive/],
      [{ bm25: -1 }, /bm25 must be 0 or more/],
      [{ vector: 1001 }, /vector must be at most 1000/],
      [{ feedback: Number.NaN }, /feedback/],
    ] as const) {
      assert.throws(
        () => mergeWeights({ bm25: 0.5, vector: 0.5 }, update),
        (error: unknown) => error instanceof InvalidWeightsError && error.status === 400 && error.code === 'invalid_request' && message.test(error.message),
      );
    }
  });

  it('updateFusionDefaults refuses bad weights with a 400 error, not a RangeError', async () => {
    const embedder = await createEmbedder(loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent' }).embedding);
    const { search } = await createFixedSearch(fixtureTools().slice(0, 3), { embedder });
    assert.throws(() => search.updateFusionDefaults({ weights: { bm25: 0, vector: 0 } }), InvalidWeightsError);
    assert.throws(() => search.updateFusionDefaults({ fusion: 'max' as never }), (error: unknown) => (error as { status?: number }).status === 400);
    assert.deepEqual(search.updateFusionDefaults({ weights: { bm25: 2 }, fusion: 'rrf' }).weights.bm25, 2);
  });
});
