import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import { embeddingText, searchableText } from '../../src/catalog/text.js';
import { bertWordPieceIds, type TokenizerJson } from '../../src/embedding/bert-words.js';
import { createEmbedder, memoizeWordPiece, OFFLINE_MODEL_ID, type Embedder } from '../../src/embedding/embedder.js';
import { ensureOfflineModel } from '../../src/embedding/offline-model.js';
import { addRow, readLookupTable, type LookupTable } from '../../src/embedding/offline/lookup-model.js';
import { loadFolderTokenizer, type Tokenizer } from '../../src/embedding/tokenizer.js';
import { loadCatalogFile, loadMetaTool, loadQueries } from '../../src/eval/datasets.js';
import { DATASETS_DIR } from '../helpers/paths.js';

const repoModels = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'models');
const MAX_TOKENS = 2048;

/** Every tool text (as the indexer embeds it) and query of the shared datasets that are present. */
function datasetTexts(): string[] {
  const texts: string[] = [];
  const metatool = path.join(DATASETS_DIR, 'metatool');
  if (existsSync(path.join(metatool, 'tools.json'))) texts.push(...loadMetaTool(metatool).tools.map((tool) => embeddingText(searchableText(tool))));
  const livemcpbench = path.join(DATASETS_DIR, 'livemcpbench', 'tools.json');
  if (existsSync(livemcpbench)) texts.push(...loadCatalogFile(livemcpbench).map((tool) => embeddingText(searchableText(tool))));
  for (const file of [path.join(DATASETS_DIR, 'everyday', 'queries.jsonl'), path.join(metatool, 'queries.csv')]) {
    if (existsSync(file)) texts.push(...loadQueries(file).map((query) => query.query));
  }
  return texts;
}

/** Strings made of what the fast path must get exactly right, or refuse. */
const trickyText = (() => {
  const char = (chars: string) => fc.constantFrom(...[...chars]);
  const part = fc.oneof(
    { weight: 4, arbitrary: char('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~') },
    { weight: 4, arbitrary: char(' \t\n\r\v\f\u00a0\u3000\u2028') },
    { weight: 2, arbitrary: fc.stringMatching(/^[0-9]{1,6}$/) },
    { weight: 6, arbitrary: fc.stringMatching(/^[a-zA-Z]{1,12}$/) },
    { weight: 3, arbitrary: fc.constantFrom('send', 'Email', 'GITHUB', 'weather', 'files', 'getHTTPResponse', 'fs', 'read_file') },
    { weight: 1, arbitrary: fc.integer({ min: 98, max: 130 }).map((n) => 'ab'.repeat(n).slice(0, n)) },
    { weight: 1, arbitrary: fc.integer({ min: 98, max: 110 }).map((n) => 'é'.repeat(n)) },
    { weight: 2, arbitrary: fc.constantFrom('[CLS]', '[SEP]', '[PAD]', '[UNK]', '[MASK]', '[cls]', '[CL', 'S]', '[', ']', 'CLS') },
    { weight: 2, arbitrary: char('éÉßİıΣσςǅﬁ中文한…—“”‘’€½²ＡＢ！\u0301\u0903\u200b\u0000\u0007\u007f\u0085\ufffd\ufeff') },
    { weight: 1, arbitrary: fc.constantFrom('😀', '𝐀', '\u{20000}', '\ud800', '\udc00', 'Ω\u0301', 'e\u0301\u0327') },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 4 }) },
  );
  return fc.array(part, { maxLength: 40 }).map((parts) => parts.join(''));
})();

describe('BERT fast path (bert-words.ts) of the offline model\'s tokenizer', () => {
  let modelDir: string;
  let library: HfTokenizer;
  let ours: Tokenizer;
  /** The ids the library gives, cut as the embedder cuts them. */
  const libraryIds = (text: string) => library.encode(text).ids.slice(0, MAX_TOKENS);
  const oursIds = (texts: string[]) => ours(texts, { padding: false, truncation: true, return_tensor: false });

  before(async () => {
    modelDir = await ensureOfflineModel(repoModels);
    const json = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8')) as object;
    const config = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf8')) as object;
    library = new HfTokenizer(json, config);
    ours = loadFolderTokenizer(modelDir);
    // As the embedder uses it: the fast path calls the memoised WordPiece model.
    memoizeWordPiece(ours.model);
  });

  test('the offline model\'s tokenizer.json has the shape the fast path takes, and others fall back', () => {
    const json = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8')) as TokenizerJson;
    const config = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf8')) as object;
    const fast = (changed: object) => {
      const variant = { ...json, ...changed };
      return bertWordPieceIds(new HfTokenizer(variant, config), variant, config);
    };
    assert.ok(fast({}), 'the offline model takes the fast path');
    assert.equal(fast({ normalizer: { ...json.normalizer, lowercase: false } }), undefined, 'cased');
    assert.equal(fast({ pre_tokenizer: { type: 'Whitespace' } }), undefined, 'another pre-tokenizer');
    assert.equal(fast({ post_processor: { type: 'BertProcessing', sep: ['[SEP]', 3], cls: ['[CLS]', 2] } }), undefined, 'a post-processor');
    const normalisedAdded = (json.added_tokens ?? []).map((token) => ({ ...token, normalized: true }));
    assert.equal(fast({ added_tokens: normalisedAdded }), undefined, 'added tokens matched after normalisation');
  });

  test('dataset tool texts and queries get the library\'s ids, mostly on the fast path', { skip: datasetTexts().length === 0 && 'no datasets (TOOLROUTER_DATASETS)' }, () => {
    const texts = datasetTexts();
    const json = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8')) as TokenizerJson;
    const fast = bertWordPieceIds(new HfTokenizer(json, {}), json, {})!;
    let answered = 0;
    for (const text of texts) if (fast(text) !== undefined) answered++;
    assert.ok(answered >= 0.99 * texts.length, `the fast path answered ${answered} of ${texts.length} texts`);
    // Refused, for the library: an added token's content, a Σ (lowercased by its neighbours), a spacing mark (Mc).
    for (const refused of ['send [CLS] email', 'ΟΔΟΣ', 'e\u0903']) assert.equal(fast(refused), undefined, refused);
    for (const answered of ['Café 中文…', 'tab\there', 'a\u200bb', '[cls]']) assert.ok(fast(answered), answered);
    const { input_ids, attention_mask } = oursIds(texts);
    texts.forEach((text, i) => {
      const expected = libraryIds(text);
      assert.deepEqual(input_ids![i], expected, JSON.stringify(text));
      assert.deepEqual(attention_mask![i], new Array<number>(expected.length).fill(1));
    });
  });

  test('generated texts (punctuation, whitespace, case, long words, added-token fragments, non-ASCII) get the library\'s ids', () => {
    fc.assert(
      fc.property(fc.array(trickyText, { minLength: 1, maxLength: 4 }), (texts) => {
        const { input_ids, attention_mask } = oursIds(texts);
        texts.forEach((text, i) => {
          const expected = libraryIds(text);
          assert.deepEqual(input_ids![i], expected, JSON.stringify(text));
          assert.deepEqual(attention_mask![i], new Array<number>(expected.length).fill(1));
        });
      }),
      { numRuns: 3000 },
    );
    // Truncation: a long text, cut as before.
    const long = 'Send the EMAIL, now! '.repeat(600);
    for (const max_length of [undefined, 7]) {
      const cut = ours([long], { padding: false, truncation: true, return_tensor: false, ...(max_length ? { max_length } : {}) }).input_ids![0]!;
      assert.deepEqual(cut, library.encode(long).ids.slice(0, max_length ?? MAX_TOKENS));
    }
  });

  describe('the embedder\'s vectors', () => {
    let embedder: Embedder;
    let table: LookupTable;
    before(async () => {
      embedder = await createEmbedder({ model: OFFLINE_MODEL_ID, modelsDir: repoModels, allowRemoteModels: false });
      table = readLookupTable(path.join(modelDir, 'onnx', 'model.onnx'))!;
    });

    /** The vector as the embedder made it before the fast path: the library's ids, every row added, then L2-normalised. */
    const reference = (text: string): Float32Array => {
      const v = new Float32Array(table.dims);
      if (text.trim() === '') return v;
      const sum = new Float64Array(table.dims);
      const everyRow = { ...table, zeroRows: new Uint8Array(table.rows) };
      for (const id of libraryIds(text)) addRow(everyRow, id, sum);
      let squares = 0;
      for (let d = 0; d < sum.length; d++) squares += sum[d]! * sum[d]!;
      const norm = Math.sqrt(squares);
      if (!(norm > 0) || !Number.isFinite(norm)) return v;
      for (let d = 0; d < sum.length; d++) v[d] = sum[d]! / norm;
      return v;
    };

    test('are unchanged for the dataset texts and generated ones', async () => {
      const texts = [...datasetTexts(), ...fc.sample(trickyText, { numRuns: 500, seed: 7 })];
      const vectors = await embedder.embed(texts);
      texts.forEach((text, i) => assert.deepEqual(vectors[i], reference(text), JSON.stringify(text)));
    });
  });
});
