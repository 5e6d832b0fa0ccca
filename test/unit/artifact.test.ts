import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import MiniSearch from 'minisearch';
import { Catalog } from '../../src/catalog/catalog.js';
import { SEARCHABLE_FIELDS, tokenize } from '../../src/catalog/text.js';
import type { Tool } from '../../src/catalog/types.js';
import { loadConfig } from '../../src/config/config.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { createEmbedder, type Embedder } from '../../src/embedding/embedder.js';
import { loadCatalogFile } from '../../src/eval/datasets.js';
import { deserializeIndex, serializeIndex } from '../../src/indexing/artifact.js';
import { DEFAULT_LEXICAL, termProcessor } from '../../src/indexing/lexical.js';
import { buildSearchIndex, type SearchIndex } from '../../src/indexing/search-index.js';
import { DEFAULT_HNSW } from '../../src/indexing/vector.js';
import { syntheticTools } from '../helpers/synthetic.js';

const queries = ['send an email', 'create a calendar event', 'export invoice', 'search files in cloud storage', 'weather'];

async function build(tools: Tool[], embedder: Embedder): Promise<SearchIndex> {
  const catalog = new Catalog();
  catalog.setSource('test', tools);
  return (await buildSearchIndex(catalog.snapshot(), { embedder })).index;
}

async function assertSameSearches(copy: SearchIndex, index: SearchIndex, embedder: Embedder): Promise<void> {
  assert.equal(copy.catalogHash, index.catalogHash);
  assert.equal(copy.size, index.size);
  assert.equal(copy.vectors.kind, index.vectors.kind);
  for (const query of queries) {
    assert.deepEqual(copy.lexical.search(query, 10), index.lexical.search(query, 10), query);
    const [vector] = await embedder.embed([query]);
    assert.deepEqual(copy.vectors.search(vector!, 10), index.vectors.search(vector!, 10), query);
  }
}

describe('index artifact', () => {
  let embedder: Embedder;
  before(async () => {
    embedder = await createEmbedder({ ...loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent' }).embedding });
  });

  it('round-trips exact and HNSW indexes', async () => {
    const small = await build(loadCatalogFile(path.join(REPO_ROOT, 'test/fixtures/catalog.json')), embedder);
    const large = await build(syntheticTools(DEFAULT_HNSW.exactThreshold + 100), embedder);
    assert.equal(small.vectors.kind, 'exact');
    assert.equal(large.vectors.kind, 'hnsw');
    for (const index of [small, large]) {
      await assertSameSearches(await deserializeIndex(serializeIndex(index, DEFAULT_HNSW), DEFAULT_LEXICAL), index, embedder);
    }
    await assert.rejects(deserializeIndex(Buffer.from('not an index'), DEFAULT_LEXICAL), /not a toolrouter index artifact/);
  });

  it('still reads format-1 artifacts, whose BM25 section is MiniSearch JSON', async () => {
    const tools = loadCatalogFile(path.join(REPO_ROOT, 'test/fixtures/catalog.json'));
    const index = await build(tools, embedder);
    const current = serializeIndex(index, DEFAULT_HNSW);
    // Rebuild the artifact as the previous version wrote it: same header and vectors, MiniSearch JSON for BM25.
    const headerLength = current.readUInt32LE(6);
    const header = JSON.parse(current.subarray(10, 10 + headerLength).toString('utf8')) as { sections: { lexical: number; vectors: number } };
    const vectors = current.subarray(10 + headerLength + header.sections.lexical);
    const engine = new MiniSearch({
      idField: 'id',
      fields: [...SEARCHABLE_FIELDS],
      storeFields: [],
      tokenize: (text: string) => tokenize(text),
      processTerm: termProcessor(DEFAULT_LEXICAL),
    });
    const catalog = new Catalog();
    catalog.setSource('test', tools);
    engine.addAll(catalog.snapshot().entries.map((entry) => ({ id: entry.tool.name, ...entry.text })));
    const lexical = Buffer.from(JSON.stringify(engine.toJSON()));
    const oldHeader = Buffer.from(JSON.stringify({ ...header, sections: { lexical: lexical.length, vectors: vectors.length } }));
    const length = Buffer.alloc(4);
    length.writeUInt32LE(oldHeader.length);
    const v1 = Buffer.concat([Buffer.from('TRIDX\u0001'), length, oldHeader, lexical, vectors]);
    await assertSameSearches(await deserializeIndex(v1, DEFAULT_LEXICAL), index, embedder);
  });
});
