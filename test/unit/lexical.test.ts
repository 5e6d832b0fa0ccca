import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import MiniSearch from 'minisearch';
import { generateCatalog } from '../../bench/catalog.js';
import { Catalog } from '../../src/catalog/catalog.js';
import { SEARCHABLE_FIELDS, tokenize, type SearchableText } from '../../src/catalog/text.js';
import type { Tool } from '../../src/catalog/types.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { loadCatalogFile, loadQueries } from '../../src/eval/datasets.js';
import { DEFAULT_LEXICAL, LexicalIndex, termProcessor, type LexicalSettings } from '../../src/indexing/lexical.js';
import { syntheticTools } from '../helpers/synthetic.js';

type Documents = { name: string; text: SearchableText }[];

function documentsOf(tools: Tool[]): Documents {
  const catalog = new Catalog();
  catalog.setSource('test', tools);
  return catalog.snapshot().entries.map((entry) => ({ name: entry.tool.name, text: entry.text }));
}

/**
 * The engine LexicalIndex replaced, configured as it was (our tokenizer and term processor, OR, no prefix or fuzzy
 * matching, field boosts, BM25 parameters): the reference for ranking semantics.
 */
function miniSearch(documents: Documents, settings: LexicalSettings = DEFAULT_LEXICAL) {
  const engine = new MiniSearch<SearchableText & { id: string }>({
    idField: 'id',
    fields: [...SEARCHABLE_FIELDS],
    storeFields: [],
    tokenize: (text: string) => tokenize(text),
    processTerm: termProcessor(settings),
    searchOptions: { combineWith: 'OR', prefix: false, fuzzy: false, boost: settings.fieldWeights, bm25: settings.bm25 },
  });
  engine.addAll(documents.map((document) => ({ id: document.name, ...document.text })));
  const search = (query: string, limit: number) =>
    engine
      .search(query, { boost: settings.fieldWeights, bm25: settings.bm25 })
      .slice(0, limit)
      .map((hit) => ({ name: String(hit.id), score: hit.score }));
  return { engine, search };
}

const fixtureQueries = loadQueries(path.join(REPO_ROOT, 'test/fixtures/queries.jsonl')).map((query) => query.query);
const liveQueries = loadQueries(path.join(REPO_ROOT, 'test/fixtures/livemcpbench-queries.jsonl')).map((query) => query.query);
const edgeQueries = [
  'file file export', // a repeated word counts twice in the score, once in the matched-terms factor
  'export file export report',
  'the of and',
  'zzzunknownword',
  '',
  'S3 bucket v2 base64Encode',
  '日本語のファイルを検索',
  'Send-Email to a contact, then create_calendar_event',
];

function assertSameRanking(index: LexicalIndex, reference: (query: string, limit: number) => { name: string; score: number }[], queries: string[], limit: number): void {
  let cut = false;
  for (const query of queries) {
    const expected = reference(query, limit);
    // Same additions in the same order as MiniSearch: scores agree to the bit, so ties order the same way.
    // Coverage is ours (MiniSearch has none); it is checked on its own below.
    assert.deepEqual(index.search(query, limit).map(({ name, score }) => ({ name, score })), expected, query);
    cut ||= expected.length === limit;
  }
  assert.ok(cut, 'no query exercised the top-k cut');
}

describe('LexicalIndex', () => {
  const fixture = documentsOf(loadCatalogFile(path.join(REPO_ROOT, 'test/fixtures/catalog.json')));
  const index = LexicalIndex.build(fixture);

  it('ranks and scores exactly as MiniSearch did on the fixture', () => {
    assertSameRanking(index, miniSearch(fixture).search, [...fixtureQueries, ...edgeQueries], 20);
  });

  it('ranks and scores exactly as MiniSearch did on larger catalogs full of ties', () => {
    // Varied real tools (the bench generator) and template tools that differ in one word: many equal scores.
    for (const tools of [generateCatalog(3000), syntheticTools(1500)]) {
      const documents = documentsOf(tools);
      const reference = miniSearch(documents);
      assertSameRanking(LexicalIndex.build(documents), reference.search, [...fixtureQueries, ...liveQueries.slice(0, 40), ...edgeQueries], 50);
    }
  });

  it('applies other scoring settings as MiniSearch did', () => {
    const settings: LexicalSettings = { fieldWeights: { name: 1, title: 4, description: 2, server: 0.5, params: 1, context: 0.5 }, bm25: { k: 1.2, b: 0.5, d: 0.5 }, stem: false, stopWords: false };
    assertSameRanking(LexicalIndex.build(fixture, settings), miniSearch(fixture, settings).search, fixtureQueries, 10);
  });

  it('leaves a field with weight 0 out of scoring', () => {
    const settings: LexicalSettings = { ...DEFAULT_LEXICAL, fieldWeights: { ...DEFAULT_LEXICAL.fieldWeights, description: 0 } };
    const documents = documentsOf([
      { name: 'alpha', description: 'spreadsheet', inputSchema: { type: 'object' } },
      { name: 'spreadsheet_tool', description: 'something', inputSchema: { type: 'object' } },
    ]);
    assert.deepEqual(LexicalIndex.build(documents, settings).search('spreadsheet', 5).map((hit) => hit.name), ['spreadsheet_tool']);
    assert.deepEqual(LexicalIndex.build(documents).search('spreadsheet', 5).map((hit) => hit.name), ['spreadsheet_tool', 'alpha']);
  });

  it('stems and drops stop words in documents and queries alike', () => {
    const plural = index.search('sending emails', 3).map((hit) => hit.name);
    const singular = index.search('send email', 3).map((hit) => hit.name);
    assert.deepEqual(plural, singular);
    assert.deepEqual(index.search('the of and', 5), []);
    // Coverage: the idf share of the query's distinct terms a tool matched. All of them: 1; a word no tool has: less.
    const [full] = index.search('send email', 1);
    assert.equal(full!.coverage, 1);
    const [partial] = index.search('send email zzqxunknown', 1);
    assert.equal(partial!.name, full!.name);
    assert.ok(partial!.coverage! > 0 && partial!.coverage! < 1, `coverage ${partial!.coverage}`);
    assert.deepEqual(index.search('send email', 0), []);
  });

  it('counts a term frequency past 16 bits exactly, and keeps it through a round trip', () => {
    const text = (description: string) => ({ name: '', title: '', description, server: '', params: '', context: '' });
    const documents = [
      { name: 'repeats', text: text(Array(70_000).fill('zebra').join(' ')) },
      { name: 'once', text: text('zebra crossing') },
      { name: 'other', text: text('crossing guard') },
    ];
    const built = LexicalIndex.build(documents);
    const [top, second] = built.search('zebra', 2);
    assert.deepEqual([top!.name, second!.name], ['repeats', 'once']);
    assert.deepEqual(LexicalIndex.deserialize(built.serialize()).search('zebra', 2), built.search('zebra', 2));
    // A frequency cut to 16 bits (70,000 → 4,464) would lower the score; the same document with 4,464 copies scores less.
    const cut = LexicalIndex.build([{ ...documents[0]!, text: text(Array(70_000 % 65_536).fill('zebra').join(' ')) }, ...documents.slice(1)]);
    assert.ok(top!.score > cut.search('zebra', 1)[0]!.score);
  });

  it('refuses two documents with the same name', () => {
    assert.throws(() => LexicalIndex.build([...fixture.slice(0, 2), fixture[0]!]), /duplicate tool name/);
  });

  it('survives a binary round trip, also into an unaligned buffer', () => {
    const bytes = index.serialize();
    const unaligned = Buffer.concat([Buffer.from([1]), bytes]).subarray(1);
    for (const copy of [LexicalIndex.deserialize(bytes), LexicalIndex.deserialize(unaligned)]) {
      assert.equal(copy.size, index.size);
      for (const query of fixtureQueries) assert.deepEqual(copy.search(query, 10), index.search(query, 10), query);
    }
    assert.throws(() => LexicalIndex.deserialize(bytes.subarray(0, bytes.length - 8)), /truncated/);
  });

  it('reads the MiniSearch JSON of format-1 artifacts with the same results', () => {
    const { engine } = miniSearch(fixture);
    const converted = LexicalIndex.fromMiniSearchJSON(JSON.stringify(engine.toJSON()));
    for (const query of fixtureQueries) assert.deepEqual(converted.search(query, 20), index.search(query, 20), query);
  });
});
