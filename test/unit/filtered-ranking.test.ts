import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { embeddingText } from '../../src/catalog/text.js';
import { HnswVectorIndex } from '../../src/indexing/vector.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

const SIZE = 10_000;
const QUERY = 'create an invoice in the billing system';

/**
 * A restricted key's ranking over a 10,000-tool catalog (an HNSW index) must be its own exact ranking, not what is left
 * of everyone's top candidates: checked over HTTP with real keys against an independent oracle (cosine over the
 * visible tools' embeddings, computed here).
 */
describe('key-filtered ranking at 10,000 tools', () => {
  let api: RunningRouter;
  const tools = syntheticTools(SIZE, 'bulk');
  const names = tools.map((tool) => tool.name);

  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, catalog: { sources: { bulk: tools } } });
    await api.indexed();
    assert.ok(api.router.indexes.current!.vectors instanceof HnswVectorIndex, 'the catalog is large enough for HNSW');
  });

  after(async () => {
    await api.close();
  });

  /** The visible tools ranked by exact cosine with the query (what the vector mode must return). */
  async function exactVectorRanking(visible: readonly string[], k: number): Promise<string[]> {
    const embedder = api.router.embedder;
    const [query] = await embedder.embed([QUERY]);
    const texts = visible.map((name) => embeddingText(api.router.catalog.get(name)!.text));
    const vectors = await embedder.embed(texts);
    const scored = visible.map((name, i) => ({ name, score: vectors[i]!.reduce((sum, value, d) => sum + value * query![d]!, 0) }));
    return scored
      .sort((a, b) => b.score - a.score)
      .slice(0, k)
      .map((hit) => hit.name);
  }

  async function search(key: string, mode: string, topK = 5): Promise<string[]> {
    // Ranking, not abstention, is under test: a tool far from the query must still come back for a key that sees only it.
    const reply = await call(api.url, 'POST', '/v1/tools/search', { key, body: { query: QUERY, mode, top_k: topK, min_score: 0 } });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    return (reply.body.results as { name: string }[]).map((result) => result.name);
  }

  test('a key that sees 1 tool in 10,000 gets it first in every ranked mode', async () => {
    // A tool far from the query: it is nowhere near everyone's top candidates.
    const target = names.find((name) => name.includes('_sync_playlist'))!;
    const { key } = await generateKey(api.url, { allowed_tools: [target] });
    const everyone = await search(ADMIN_KEY, 'hybrid', 50);
    assert.ok(!everyone.includes(target), 'the target is not among the unrestricted top 50');
    for (const mode of ['hybrid', 'bm25', 'vector']) {
      const results = await search(key, mode);
      if (mode === 'bm25' && results.length === 0) continue; // no query word in common is a fair empty answer
      assert.deepEqual(results, [target], mode);
    }
  });

  test('a key that sees 1% gets the exact ranking of what it sees', async () => {
    const visible = names.filter((_, i) => i % 100 === 37);
    const { key } = await generateKey(api.url, { allowed_tools: visible });
    assert.deepEqual(await search(key, 'vector', 10), await exactVectorRanking(visible, 10));
    for (const name of await search(key, 'hybrid', 10)) assert.ok(visible.includes(name), `${name} is not visible to the key`);
    // BM25 over the key's label set ranks exactly as the index filtered by name does.
    const visibleSet = new Set(visible);
    const byName = api.router.indexes.current!.lexical.search(QUERY, 10, (name) => visibleSet.has(name)).map((hit) => hit.name);
    assert.ok(byName.length > 0, 'the query has words in common with visible tools');
    assert.deepEqual(await search(key, 'bm25', 10), byName);
    // Again: the second request is answered from the key's cached visible set, and must not differ.
    assert.deepEqual(await search(key, 'vector', 10), await exactVectorRanking(visible, 10));
  });

  test('a key that sees half the catalog gets its nearest tools', async () => {
    const visible = names.filter((_, i) => i % 2 === 1);
    const visibleSet = new Set(visible);
    const { key } = await generateKey(api.url, { allowed_tools: visible });
    const results = await search(key, 'vector', 10);
    for (const name of results) assert.ok(visibleSet.has(name), `${name} is not visible to the key`);
    const truth = new Set(await exactVectorRanking(visible, 10));
    const found = results.filter((name) => truth.has(name)).length;
    // HNSW is approximate (recall@10 0.999 at this size in the bench); 9 of 10 leaves room for one miss.
    assert.ok(found >= 9, `found ${found} of the exact top 10: ${results.join(', ')}`);
  });
});
