import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { env, pipeline } from '@huggingface/transformers';
import { createEmbedder } from '../../src/embedding/embedder.js';
import { createCrossEncoder } from '../../src/embedding/cross-encoder.js';
import { loadConfig } from '../../src/config/config.js';
import { readLookupTable } from '../../src/embedding/offline/lookup-model.js';
import { TINY_MODEL_TYPES, tinyModelsDir, writeOneHotEncoder, writeWordScoreCrossEncoder, type TinyModelType } from '../helpers/tiny-models.js';

/**
 * Every model type the README says runs in process, as a tiny model of that type (config.json model_type, the
 * offline model's Gather graph) loaded through @huggingface/transformers v4: the same vectors as its own
 * feature-extraction pipeline, the presets' pooling and prompts, and the dtype's file.
 */
describe('transformers.js v4: model types, presets and dtypes on test-built models', () => {
  const modelsDir = tinyModelsDir();
  const words = ['alpha', 'beta', 'gamma', 'instruct', 'task', 'query', 'search', 'result', 'title', 'none', 'text'];
  const at = (word: string) => words.indexOf(word);
  const unit = (...parts: string[]) => {
    const v = new Array<number>(words.length).fill(0);
    for (const word of parts) v[at(word)]! += 1;
    const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    return v.map((x) => (n > 0 ? x / n : 0));
  };
  const close = (actual: ArrayLike<number>, expected: number[], what = '') =>
    assert.ok(
      actual.length === expected.length && expected.every((x, d) => Math.abs(actual[d]! - x) < 1e-6),
      `${what} got [${Array.from(actual, (x) => x.toFixed(3))}], expected [${expected.map((x) => x.toFixed(3))}]`,
    );
  const open = (model: string, extra: Record<string, unknown> = {}) => createEmbedder({ model, modelsDir, allowRemoteModels: false, ...extra });

  for (const modelType of Object.keys(TINY_MODEL_TYPES) as TinyModelType[]) {
    it(`${modelType}: loads in process and pools as transformers.js's own pipeline does`, async () => {
      const id = `test/tiny-${modelType}`;
      writeOneHotEncoder(modelsDir, id, words, { modelType, paddingSide: modelType === 'qwen3' ? 'left' : 'right' });
      const texts = ['alpha beta', 'gamma alpha alpha', 'beta'];
      for (const pooling of ['mean', 'cls', 'last'] as const) {
        const embedder = await open(id, { pooling });
        assert.equal(embedder.dimensions, words.length);
        const ours = await embedder.embed(texts);
        const expected = pooling === 'mean' ? [unit('alpha', 'beta'), unit('gamma', 'alpha', 'alpha'), unit('beta')] : pooling === 'cls' ? [unit('alpha'), unit('gamma'), unit('beta')] : [unit('beta'), unit('alpha'), unit('beta')];
        ours.forEach((v, i) => close(v, expected[i]!, `${pooling} "${texts[i]}"`));
      }
      env.localModelPath = modelsDir;
      env.allowRemoteModels = false;
      const extractor = await pipeline('feature-extraction', id, { dtype: 'fp32' });
      const reference = await extractor(texts, { pooling: 'mean', normalize: true });
      const ours = await (await open(id, { pooling: 'mean' })).embed(texts);
      ours.forEach((v, i) => close(v, Array.from(reference.data as Float32Array).slice(i * words.length, (i + 1) * words.length), `pipeline "${texts[i]}"`));
    });
  }

  it('Qwen3-Embedding: last-token pooling, the instruction before queries only, left padding in a batch', async () => {
    writeOneHotEncoder(modelsDir, 'test/Qwen3-Embedding-tiny', words, { modelType: 'qwen3', paddingSide: 'left' });
    const embedder = await open('test/Qwen3-Embedding-tiny');
    const [short, long] = await embedder.embed(['alpha', 'beta gamma alpha beta gamma'], { role: 'query' });
    close(short!, unit('alpha'));
    close(long!, unit('gamma'));
    close((await embedder.embed(['beta gamma']))[0]!, unit('gamma'));
    // Mean pooling shows what the model saw: "Instruct: Given a task description, ... Query:" before the query only.
    const mean = await open('test/Qwen3-Embedding-tiny', { pooling: 'mean' });
    close((await mean.embed(['alpha'], { role: 'query' }))[0]!, unit('instruct', 'task', 'query', 'alpha'));
    close((await mean.embed(['alpha']))[0]!, unit('alpha'));
  });

  it('EmbeddingGemma: mean pooling and its prompts ("task: search result | query: ", "title: none | text: ")', async () => {
    writeOneHotEncoder(modelsDir, 'test/embeddinggemma-tiny', words, { modelType: 'gemma3_text' });
    const embedder = await open('test/embeddinggemma-tiny');
    close((await embedder.embed(['alpha'], { role: 'query' }))[0]!, unit('task', 'search', 'result', 'query', 'alpha'));
    close((await embedder.embed(['alpha beta']))[0]!, unit('title', 'none', 'text', 'alpha', 'beta'));
  });

  it('embedding.dtype picks the ONNX file; without it the first present, fp32 first; a missing one is named', async () => {
    writeOneHotEncoder(modelsDir, 'test/dtypes', words, { dtypes: ['fp32', 'fp16', 'q8', 'q4'] });
    const shifted = (k: number) => unit(words[(at('alpha') + k) % words.length]!);
    close((await (await open('test/dtypes')).embed(['alpha']))[0]!, shifted(0));
    for (const [dtype, k] of [['fp16', 1], ['q8', 2], ['q4', 3]] as const) {
      const embedder = await open('test/dtypes', { dtype });
      close((await embedder.embed(['alpha']))[0]!, shifted(k), dtype);
      assert.match(embedder.cacheKey, new RegExp(`:${dtype}$`), 'vectors of another precision are cached apart');
    }
    close((await (await open('test/dtypes', { quantized: true })).embed(['alpha']))[0]!, shifted(2), 'quantized: true is q8');
    writeOneHotEncoder(modelsDir, 'test/only-q4', words, { dtypes: ['q4'] });
    close((await (await open('test/only-q4')).embed(['alpha']))[0]!, shifted(3), 'only model_q4.onnx');
    await assert.rejects(open('test/only-q4', { dtype: 'fp16' }), /dtype "fp16" needs onnx\/model_fp16\.onnx .*offers q4 \(onnx\/model_q4\.onnx\)/);
  });

  it('the lookup-table reader takes an fp32 Gather graph and nothing else (read without the ONNX schema library)', () => {
    writeOneHotEncoder(modelsDir, 'test/lookup-fp32', words);
    const table = readLookupTable(path.join(modelsDir, 'test/lookup-fp32/onnx/model.onnx'));
    assert.ok(table && table.values instanceof Float32Array);
    assert.deepEqual([table.rows, table.dims], [4 + words.length, words.length]);
    // Word i (row 4 + i) is e_i.
    words.forEach((_, i) => assert.deepEqual(Array.from(table.values.subarray((4 + i) * words.length, (5 + i) * words.length)), unit(words[i]!)));
    writeWordScoreCrossEncoder(modelsDir, 'test/not-a-lookup', { weather: 1 });
    assert.equal(readLookupTable(path.join(modelsDir, 'test/not-a-lookup/onnx/model.onnx')), undefined, 'Gather then ReduceSum is not a lookup model');
  });

  it('embedding.dtype comes from the config or EMBEDDING_DTYPE, one of fp32, fp16, q8, q4', () => {
    assert.equal(loadConfig({ EMBEDDING_DTYPE: 'q4' }).embedding.dtype, 'q4');
    assert.equal(loadConfig({}, { embedding: { dtype: 'fp16' } }).embedding.dtype, 'fp16');
    assert.equal(loadConfig({}).embedding.dtype, undefined);
    assert.throws(() => loadConfig({ EMBEDDING_DTYPE: 'int3' }), /embedding\.dtype: .*"fp32"\|"fp16"\|"q8"\|"q4"/);
    assert.equal(loadConfig({}, { search: { rerank: { dtype: 'q8' } } }).search.rerank.dtype, 'q8');
  });

  it('a model type the runtime cannot load fails at start, naming the type and what is supported', async () => {
    writeOneHotEncoder(modelsDir, 'test/mystery', words);
    const dir = path.join(modelsDir, 'test/mystery');
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ model_type: 'mystery_bert', hidden_size: words.length }));
    await assert.rejects(open('test/mystery'), (err: Error) => {
      assert.match(err.message, /model type "mystery_bert" cannot be loaded by @huggingface\/transformers \(\d+ types, e\.g\. bert, nomic_bert, xlm-roberta, modernbert, mpnet, qwen3, gemma3_text\)/);
      return true;
    });
    mkdirSync(path.join(modelsDir, 'test/mystery-reranker'), { recursive: true });
    writeWordScoreCrossEncoder(modelsDir, 'test/mystery-reranker', { weather: 1 });
    writeFileSync(path.join(modelsDir, 'test/mystery-reranker', 'config.json'), JSON.stringify({ model_type: 'qwen3', architectures: ['Qwen3Model'] }));
    await assert.rejects(createCrossEncoder({ model: 'test/mystery-reranker', modelsDir, allowRemoteModels: false }), /cross-encoder "test\/mystery-reranker": model type "qwen3" cannot be loaded/);
  });

  it('a cross-encoder of type xlm-roberta (bge-reranker) scores pairs, from the file its dtype names', async () => {
    writeWordScoreCrossEncoder(modelsDir, 'test/bge-reranker-tiny', { weather: 3, forecast: 1, email: -1 }, { modelType: 'xlm-roberta', dtype: 'q8' });
    const encoder = await createCrossEncoder({ model: 'test/bge-reranker-tiny', modelsDir, allowRemoteModels: false });
    // logit = Σ word scores over query and document tokens: query "weather" (3) + each document's words.
    assert.deepEqual(await encoder.score('weather', ['forecast', 'email', 'weather forecast', 'nothing']), [4, 2, 7, 3]);
    await assert.rejects(createCrossEncoder({ model: 'test/bge-reranker-tiny', modelsDir, allowRemoteModels: false, dtype: 'fp32' }), /needs onnx\/model\.onnx/);
  });
});
