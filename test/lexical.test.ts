import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { Catalog } from '../src/catalog/catalog.js';
import { PROJECT_ROOT } from '../src/config/config.js';
import { loadCatalogFile, loadQueries } from '../src/eval/datasets.js';
import MiniSearch from 'minisearch';
import { DEFAULT_LEXICAL, LexicalIndex } from '../src/index/lexical.js';

describe('LexicalIndex', () => {
  const catalog = new Catalog();
  catalog.setSource('fixture', loadCatalogFile(path.join(PROJECT_ROOT, 'test/fixtures/catalog.json')));
  const index = LexicalIndex.build(catalog.snapshot().entries.map((entry) => ({ name: entry.tool.name, text: entry.text })));
  const queries = loadQueries(path.join(PROJECT_ROOT, 'test/fixtures/queries.jsonl')).map((query) => query.query);

  it('ranks from MiniSearch internals exactly as its public search() does', () => {
    // The fast path reads MiniSearch internals; the engine's public search() with the same options is the reference.
    const engine = (index as unknown as { engine: MiniSearch }).engine;
    const options = { boost: DEFAULT_LEXICAL.fieldWeights, bm25: DEFAULT_LEXICAL.bm25 };
    for (const query of queries) {
      const reference = engine
        .search(query, options)
        .slice(0, 20)
        .map((hit) => ({ name: String(hit.id), score: hit.score }));
      assert.deepEqual(index.search(query, 20), reference, query);
    }
    assert.ok(queries.some((query) => index.search(query, 20).length === 20), 'no query exercised the top-20 cut');
  });

  it('stems and drops stop words in documents and queries alike', () => {
    const plural = index.search('sending emails', 3).map((hit) => hit.name);
    const singular = index.search('send email', 3).map((hit) => hit.name);
    assert.deepEqual(plural, singular);
    assert.deepEqual(index.search('the of and', 5), []);
  });

  it('survives a serialisation round trip', () => {
    const copy = LexicalIndex.fromJSON(JSON.stringify(index.toJSON()));
    assert.deepEqual(copy.search('create a calendar event', 10), index.search('create a calendar event', 10));
  });
});
