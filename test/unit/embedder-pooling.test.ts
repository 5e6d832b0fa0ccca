import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createEmbedder } from '../../src/embedding/embedder.js';
import { modelSettings } from '../../src/embedding/presets.js';
import { tinyModelsDir, writeOneHotEncoder } from '../helpers/tiny-models.js';

/** Pooling, normalisation and prefixes through the real transformers.js path, on models whose outputs are known. */
describe('transformers provider: pooling and prefixes on test-built models', () => {
  const modelsDir = tinyModelsDir();
  // Word i is e_i: alpha e0, beta e1, gamma e2, query e3, passage e4.
  const words = ['alpha', 'beta', 'gamma', 'query', 'passage'];
  writeOneHotEncoder(modelsDir, 'test/onehot', words);
  writeOneHotEncoder(modelsDir, 'test/e5-onehot', words);
  const e = (...parts: [number, number][]) => {
    const v = new Array<number>(words.length).fill(0);
    for (const [i, w] of parts) v[i] = w;
    return v;
  };
  const close = (actual: Float32Array, expected: number[]) =>
    assert.ok(
      actual.length === expected.length && expected.every((x, d) => Math.abs(actual[d]! - x) < 1e-6),
      `got [${[...actual].map((x) => x.toFixed(3))}], expected [${expected.map((x) => x.toFixed(3))}]`,
    );
  const open = (extra: Record<string, unknown>, model = 'test/onehot') =>
    createEmbedder({ model, modelsDir, allowRemoteModels: false, ...extra });
  const h = Math.SQRT1_2;

  it('mean pooling averages the tokens, then normalises', async () => {
    const embedder = await open({});
    assert.equal(embedder.dimensions, words.length);
    const [v] = await embedder.embed(['alpha beta']);
    close(v!, e([0, h], [1, h]));
    const [raw] = await (await open({ normalize: false })).embed(['alpha beta']);
    close(raw!, e([0, 0.5], [1, 0.5]));
  });

  it('CLS pooling takes the first token and last-token pooling the last real one, also beside longer texts in a batch', async () => {
    const cls = await open({ pooling: 'cls' });
    const last = await open({ pooling: 'last' });
    const texts = ['alpha beta', 'gamma beta alpha alpha alpha', 'beta'];
    const [c1, c2, c3] = await cls.embed(texts);
    close(c1!, e([0, 1]));
    close(c2!, e([2, 1]));
    close(c3!, e([1, 1]));
    const [l1, l2, l3] = await last.embed(texts);
    close(l1!, e([1, 1]));
    close(l2!, e([0, 1]));
    close(l3!, e([1, 1]));
  });

  it('queries and documents get their own prefix, and the cache key follows the document prefix', async () => {
    const embedder = await open({ queryPrefix: 'query: ', documentPrefix: 'passage: ' });
    const [doc] = await embedder.embed(['alpha']);
    const [query] = await embedder.embed(['alpha'], { role: 'query' });
    close(doc!, e([4, h], [0, h]));
    close(query!, e([3, h], [0, h]));
    const [empty] = await embedder.embed(['  '], { role: 'query' });
    close(empty!, e());
    assert.notEqual(embedder.cacheKey, (await open({})).cacheKey);
    assert.equal((await open({})).cacheKey, 'test/onehot', 'plain mean-pooled models keep the model id as cache key');
  });

  it('a known model id gets its preset (e5: query:/passage:), and a configured field wins over it', async () => {
    const e5 = await open({}, 'test/e5-onehot');
    close((await e5.embed(['alpha'], { role: 'query' }))[0]!, e([3, h], [0, h]));
    close((await e5.embed(['alpha']))[0]!, e([4, h], [0, h]));
    const overridden = await open({ queryPrefix: '' }, 'test/e5-onehot');
    close((await overridden.embed(['alpha'], { role: 'query' }))[0]!, e([0, 1]));
  });

  it('presets for well-known ids', () => {
    assert.equal(modelSettings('Xenova/bge-small-en-v1.5').pooling, 'cls');
    assert.match(modelSettings('BAAI/bge-base-en-v1.5').queryPrefix, /^Represent this sentence/);
    assert.deepEqual(
      [modelSettings('nomic-ai/nomic-embed-text-v1.5').queryPrefix, modelSettings('nomic-ai/nomic-embed-text-v1.5').documentPrefix],
      ['search_query: ', 'search_document: '],
    );
    assert.equal(modelSettings('onnx-community/Qwen3-Embedding-0.6B-ONNX').pooling, 'last');
    assert.equal(modelSettings('Xenova/all-MiniLM-L6-v2').pooling, 'mean');
    assert.equal(modelSettings('Alibaba-NLP/gte-modernbert-base').pooling, 'cls');
    assert.equal(modelSettings('Xenova/gte-small').pooling, 'mean');
    assert.equal(modelSettings('nomic-ai/modernbert-embed-base').queryPrefix, 'search_query: ');
    assert.equal(modelSettings('Xenova/multilingual-e5-small').documentPrefix, 'passage: ');
    assert.equal(modelSettings('onnx-community/embeddinggemma-300m-ONNX').documentPrefix, 'title: none | text: ');
    assert.deepEqual(modelSettings('toolrouter/glove-100d-sif-150k'), { pooling: 'mean', normalize: true, queryPrefix: '', documentPrefix: '' });
    assert.equal(modelSettings('Xenova/bge-small-en-v1.5', { pooling: 'mean' }).pooling, 'mean');
  });
});
