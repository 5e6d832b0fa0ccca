/**
 * Text embeddings behind one seam, from one of two providers: `transformers` (this file: a transformers.js v4 model
 * with the model's pooling, normalisation and query/document prefixes, src/embedding/presets.ts) or `openai` (any
 * OpenAI-compatible `POST /v1/embeddings`, src/embedding/openai.ts). Models are data under `modelsDir` in the
 * transformers.js layout (`<modelsDir>/<org>/<name>/{config.json,tokenizer.json,tokenizer_config.json,onnx/model*.onnx}`);
 * the offline default ships in the package (built at prepack, or on demand in a source checkout) and runs without
 * the ONNX runtime; anything else must be put there or, when remote models are allowed, is downloaded once into the
 * same place, and runs through `@huggingface/transformers` (src/embedding/runtime.ts).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { OFFLINE_MODEL_ID, ensureOfflineModel, isModelCurrent } from './offline-model.js';
import { addRow, readLookupTable, type LookupTable } from './offline/lookup-model.js';
import { modelSettings, type ModelSettings, type Pooling } from './presets.js';
import { createOpenAiEmbedder, type OpenAiEmbedderOptions } from './openai.js';
import { checkModelType, chooseDtype, loadTransformers, ONNX_DTYPES, onnxFileOf, pointAtModels, type OnnxDtype, type TransformersModule } from './runtime.js';
import { loadFolderTokenizer, type Tokenizer, type WordPieceModel } from './tokenizer.js';
import type { EmbedOptions, Embedder, ThreadableEmbedder } from './types.js';

export { OFFLINE_MODEL_ID } from './offline-model.js';

export type { EmbedOptions, EmbedRole, Embedder } from './types.js';

export interface EmbedderOptions extends Partial<ModelSettings>, Partial<Omit<OpenAiEmbedderOptions, 'model' | 'batchSize'>> {
  /** `transformers` (default) or `openai`. */
  provider?: 'transformers' | 'openai';
  model: string;
  modelsDir: string;
  /**
   * Where the package ships the offline default model (its own `models/`): used for that model when `modelsDir`
   * (a user's MODELS_DIR for their own models) does not hold it, instead of building it there, which an installed
   * package cannot (the GloVe source is a dev dependency). Handed in by the assembly.
   */
  shippedModelsDir?: string;
  allowRemoteModels: boolean;
  batchSize?: number;
  /** Longest input in tokens; longer texts are truncated (default: the tokenizer's model_max_length). */
  maxTokens?: number;
  /**
   * Which ONNX file of the model folder to load: fp32 `onnx/model.onnx`, fp16 `model_fp16.onnx`, q8
   * `model_quantized.onnx`, q4 `model_q4.onnx`. Default: the first present in the order fp32, q8, fp16, q4.
   */
  dtype?: OnnxDtype;
  /** Older spelling: true = dtype q8, false = fp32. `dtype` wins when both are set. */
  quantized?: boolean;
}

export const DEFAULT_BATCH_SIZE = 64;

export class EmbeddingModelNotFoundError extends Error {
  override readonly name = 'EmbeddingModelNotFoundError';
}

interface TensorLike {
  data: ArrayLike<number | bigint>;
  dims: number[];
}

/** A tokenizer and either an ONNX model run by transformers.js or a lookup table (the offline model). */
type Extractor = { tokenizer: Tokenizer } & (
  | {
      model: (inputs: Record<string, TensorLike>) => Promise<Record<string, TensorLike | undefined>>;
      Tensor: TransformersModule['Tensor'];
      /** The ONNX file's precision: part of the cache key, as vectors differ between fp32 and q8 of one model. */
      dtype: OnnxDtype;
      table?: undefined;
    }
  /** A table-lookup model (the offline model): pooling reads the table's rows directly, no model call. */
  | { table: LookupTable; model?: undefined }
);

const REQUIRED_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];

/** Named in the error for a model type the runtime cannot load: the families this project documents. */
const TYPICAL_ENCODERS = ['bert', 'nomic_bert', 'xlm-roberta', 'modernbert', 'mpnet', 'qwen3', 'gemma3_text'];

/**
 * transformers.js keeps its settings in one global `env` read while a model loads; serialising loads keeps two
 * embedders with different settings from seeing each other's values.
 */
let loadQueue: Promise<unknown> = Promise.resolve();

export async function createEmbedder(opts: EmbedderOptions): Promise<Embedder> {
  if (opts.provider === 'openai') {
    if (!opts.baseUrl) throw new Error('embedding.provider "openai" needs embedding.baseUrl (EMBEDDING_BASE_URL)');
    return createOpenAiEmbedder({ ...opts, baseUrl: opts.baseUrl, batchSize: opts.batchSize ?? DEFAULT_BATCH_SIZE });
  }
  const settings = modelSettings(opts.model, opts);
  let modelsDir = path.resolve(opts.modelsDir);
  const batchSize = opts.batchSize ?? DEFAULT_BATCH_SIZE;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new Error(`batchSize must be a positive integer, got ${batchSize}`);
  if (opts.model === OFFLINE_MODEL_ID) {
    const shipped = opts.shippedModelsDir === undefined ? undefined : path.resolve(opts.shippedModelsDir);
    if (shipped && !isModelCurrent(path.join(modelsDir, OFFLINE_MODEL_ID)) && isModelCurrent(path.join(shipped, OFFLINE_MODEL_ID))) modelsDir = shipped;
    else await ensureOfflineModel(modelsDir);
  }

  const modelDir = path.join(modelsDir, opts.model);
  const local = localModelFiles(modelDir);
  if (!local.complete && !opts.allowRemoteModels) {
    throw new EmbeddingModelNotFoundError(
      `embedding model "${opts.model}" is not available locally and remote models are disabled.\n` +
        `  missing in ${modelDir}: ${local.missing.join(', ')}\n` +
        `  either put the model's transformers.js files there (config.json, tokenizer.json, tokenizer_config.json, ` +
        `and one of ${ONNX_DTYPES.map(onnxFileOf).join(', ')}; see models/README.md),\n` +
        `  or set ALLOW_REMOTE_MODELS=true to download it once from the Hugging Face Hub into ${modelsDir},\n` +
        `  or use the offline default EMBEDDING_MODEL=${OFFLINE_MODEL_ID}.`,
    );
  }

  const dtype = opts.dtype ?? (opts.quantized === undefined ? undefined : opts.quantized ? 'q8' : 'fp32');
  const load = loadQueue.then(async (): Promise<Extractor> => {
    try {
      // The offline model is a table lookup: answered in JavaScript from its table, without the ONNX runtime.
      const table = opts.model === OFFLINE_MODEL_ID && local.complete ? readLookupTable(path.join(modelDir, 'onnx', 'model.onnx')) : undefined;
      if (table) return { tokenizer: loadFolderTokenizer(modelDir), table };
      const tf = await loadTransformers(`embedding model "${opts.model}"`);
      pointAtModels(tf, modelsDir, opts.allowRemoteModels);
      const config = await tf.AutoConfig.from_pretrained(opts.model);
      checkModelType(tf.AutoModel, config.model_type, `embedding model "${opts.model}"`, TYPICAL_ENCODERS);
      const chosen = chooseDtype(modelDir, dtype, opts.allowRemoteModels) ?? 'fp32';
      const tokenizer = (await tf.AutoTokenizer.from_pretrained(opts.model)) as Tokenizer;
      const model = (await tf.AutoModel.from_pretrained(opts.model, { config, dtype: chosen, device: 'cpu' })) as Extractor['model'] & object;
      return { tokenizer, model, Tensor: tf.Tensor, dtype: chosen };
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      throw new Error(
        `could not load embedding model "${opts.model}" (models dir ${modelsDir}, remote ${
          opts.allowRemoteModels ? 'allowed' : 'disabled'
        }): ${reason}`,
        { cause: err },
      );
    }
  });
  loadQueue = load.catch(() => undefined);
  const extractor = await load;
  // transformers.js v4 keeps the tokenizers.js tokenizer (and its model) under _tokenizer; ours has it on top.
  memoizeWordPiece(extractor.tokenizer.model ?? (extractor.tokenizer as { _tokenizer?: { model?: WordPieceModel } })._tokenizer?.model);

  const embedder = new TransformersEmbedder(opts.model, extractor, batchSize, settings, opts.maxTokens, extractor.table ? undefined : extractor.dtype);
  // A table-lookup model is plain JavaScript over the files just read: another thread can make the same embedder.
  // Only with the model's default prefixes and pooling, so the options below are all that shapes its vectors.
  if (extractor.table && sameAsPreset(opts)) {
    embedder.threadable = { model: opts.model, modelsDir, allowRemoteModels: false, batchSize, ...(opts.maxTokens === undefined ? {} : { maxTokens: opts.maxTokens }) };
  }
  // The output, not config.json, settles the dimension: configs name it differently per architecture
  // (hidden_size, d_model, dim). The call also warms the session so the first real query is not the slow one.
  const [probe] = await embedder.embedRaw(['dimension probe']);
  if (!probe || probe.length === 0) throw new Error(`embedding model "${opts.model}" returned an empty vector`);
  embedder.dimensions = probe.length;
  return embedder;
}

class TransformersEmbedder implements Embedder {
  dimensions = 0;
  readonly cacheKey: string;
  threadable?: ThreadableEmbedder;

  constructor(
    readonly modelId: string,
    private readonly extractor: Extractor,
    private readonly batchSize: number,
    private readonly settings: ModelSettings,
    private readonly maxTokens: number | undefined,
    dtype: OnnxDtype | undefined,
  ) {
    // The offline default keeps its plain model id as key, so caches filled before prefixes existed stay valid; an
    // fp32 model keeps the key it had before dtypes could be chosen.
    const { pooling, normalize, documentPrefix } = settings;
    const reduced = dtype !== undefined && dtype !== 'fp32' ? `:${dtype}` : '';
    const plain = pooling === 'mean' && normalize && documentPrefix === '' && maxTokens === undefined && reduced === '';
    this.cacheKey = plain ? modelId : `transformers:${modelId}:${pooling}:${normalize ? 'l2' : 'raw'}:${maxTokens ?? ''}:${documentPrefix}${reduced}`;
  }

  async embed(texts: string[], options: EmbedOptions = {}): Promise<Float32Array[]> {
    const prefix = options.role === 'query' ? this.settings.queryPrefix : this.settings.documentPrefix;
    // An empty text stays empty: a prefix alone would give it a vector that looks like a real match.
    const out = await this.embedRaw(prefix === '' ? texts : texts.map((t) => (typeof t === 'string' && t.trim() !== '' ? prefix + t : t)));
    for (const v of out) {
      if (v.length !== this.dimensions) throw new Error(`model returned ${v.length} dimensions, expected ${this.dimensions}`);
    }
    return out;
  }

  async embedRaw(texts: string[]): Promise<Float32Array[]> {
    const out: Float32Array[] = new Array(texts.length);
    const todo: number[] = [];
    texts.forEach((t, i) => {
      if (typeof t !== 'string') throw new TypeError(`embed() expects strings; item ${i} is ${typeof t}`);
      // Nothing to encode; for models with [CLS]/[SEP] the pipeline would otherwise invent a vector from those.
      if (t.trim() === '') out[i] = new Float32Array(this.dimensions);
      else todo.push(i);
    });
    // Batches pad to their longest text, so texts are batched by token count: grouping by character length left
    // half of every batch padding on tool texts (2.05× the real tokens at batch 64; by token count 1.02×). Texts are
    // tokenised a chunk at a time (sorted by length first, so a chunk holds similar texts) to bound memory.
    todo.sort((a, b) => texts[a]!.length - texts[b]!.length);
    const chunkSize = this.batchSize * 32;
    for (let chunkStart = 0; chunkStart < todo.length; chunkStart += chunkSize) {
      const chunk = todo.slice(chunkStart, chunkStart + chunkSize);
      // Tokenised a batch at a time with the event loop handed back in between: a whole chunk at once (2,048 texts)
      // held the thread for up to a second, and with it every request (the index status among them).
      const encoded: Record<string, number[][]> = {};
      for (let at = 0; at < chunk.length; at += this.batchSize) {
        if (at > 0) await new Promise((resolve) => setImmediate(resolve));
        const part = this.extractor.tokenizer(
          chunk.slice(at, at + this.batchSize).map((i) => texts[i]!),
          { padding: false, truncation: true, return_tensor: false, ...(this.maxTokens ? { max_length: this.maxTokens } : {}) },
        );
        for (const [key, values] of Object.entries(part)) {
          const into = (encoded[key] ??= []);
          for (const value of values as number[][]) into.push(value);
        }
      }
      const ids = encoded.input_ids;
      if (!ids) throw new Error(`tokenizer of "${this.modelId}" returned no input_ids`);
      const order = chunk.map((_, row) => row).sort((a, b) => ids[a]!.length - ids[b]!.length);
      for (let start = 0; start < order.length; start += this.batchSize) {
        const rows = order.slice(start, start + this.batchSize);
        const batch: Record<string, number[][]> = {};
        for (const [key, values] of Object.entries(encoded)) batch[key] = rows.map((row) => values[row]!);
        const vectors = await this.forward(batch);
        rows.forEach((row, r) => {
          out[chunk[row]!] = vectors[r]!;
        });
        // onnxruntime-node runs a session synchronously behind a promise (process.nextTick), so awaiting it never lets
        // the event loop turn: without this, embedding a 100k-tool catalog held every request for its whole 20-40 s.
        if (chunkStart + start + this.batchSize < todo.length) await new Promise((resolve) => setImmediate(resolve));
      }
    }
    return out;
  }

  /**
   * What the pipeline's own call with {pooling: 'mean', normalize: true} computes (tokenise with padding and
   * truncation, run the model, average last_hidden_state over attention_mask, L2-normalise), done on plain typed
   * arrays: transformers.js pools through its Proxy-wrapped Tensor element by element, which made mean pooling
   * 80% of indexing time. A test checks both give the same vectors.
   */
  private async forward(encoded: Record<string, number[][]>): Promise<Float32Array[]> {
    const { extractor } = this;
    if (extractor.table) return this.poolRows(encoded, extractor.table);
    // Padded here as the tokenizer pads (input_ids with the pad token, every other input with 0, on its padding side)
    // and made into int64 tensors directly: the tokenizer's own tensors go through three intermediate arrays and a
    // BigInt per element, which was a fifth of indexing time with the offline model.
    const { pad_token_id: padId = 0, padding_side: side = 'right' } = this.extractor.tokenizer;
    const inputs: Record<string, TensorLike> = {};
    for (const [key, rows] of Object.entries(encoded)) inputs[key] = int64Tensor(extractor.Tensor, rows, key === 'input_ids' ? padId : 0, side);
    const outputs = await extractor.model(inputs);
    const hidden = outputs.last_hidden_state ?? outputs.logits ?? outputs.token_embeddings;
    const mask = encoded.attention_mask;
    if (!hidden || !mask) throw new Error(`model "${this.modelId}" returned no last_hidden_state (or no attention_mask)`);
    const [batch, seq, dims] = hidden.dims;
    if (batch !== mask.length || seq === undefined || !dims) throw new Error(`unexpected model output shape [${hidden.dims.join(', ')}]`);
    const h = hidden.data;
    if (!(h instanceof Float32Array || h instanceof Float64Array)) throw new Error(`model "${this.modelId}" outputs non-float hidden states`);
    const result: Float32Array[] = [];
    const sum = new Float64Array(dims);
    const { pooling, normalize } = this.settings;
    for (let b = 0; b < batch; b++) {
      sum.fill(0);
      // The unpadded mask, shifted past the padding when the tokenizer pads on the left.
      const m = mask[b]!;
      const shift = side === 'left' ? seq - m.length : 0;
      const positions = pooledPositions(m, pooling);
      for (const position of positions) {
        const base = (b * seq + position + shift) * dims;
        for (let d = 0; d < dims; d++) sum[d] = sum[d]! + h[base + d]!;
      }
      result.push(normalize ? normalise(sum, positions.length) : mean(sum, positions.length));
    }
    return result;
  }

  /**
   * `forward` for a table-lookup model: the pooled tokens' rows summed straight from the table, in the order and with
   * the floats pooling over the model's output would add (offline/lookup-model.ts), so the vectors are the same.
   */
  private poolRows(encoded: Record<string, number[][]>, table: LookupTable): Float32Array[] {
    const ids = encoded.input_ids;
    const mask = encoded.attention_mask;
    if (!ids || !mask) throw new Error(`tokenizer of "${this.modelId}" returned no input_ids or attention_mask`);
    const { pooling, normalize } = this.settings;
    const sum = new Float64Array(table.dims);
    return ids.map((row, b) => {
      sum.fill(0);
      const m = mask[b]!;
      let count = 0;
      // Mean pooling (the offline model's) reads every attended token in order: done in place, without the positions
      // array pooledPositions would build per row.
      if (pooling === 'mean') {
        for (let t = 0; t < m.length; t++) {
          if (m[t] === 0) continue;
          addRow(table, row[t]!, sum);
          count++;
        }
      } else {
        const positions = pooledPositions(m, pooling);
        for (const position of positions) addRow(table, row[position]!, sum);
        count = positions.length;
      }
      return normalize ? normalise(sum, count) : mean(sum, count);
    });
  }
}

/**
 * Token positions (in the unpadded row) a pooling reads: every attended token (mean), the first ([CLS] of BERT-style
 * encoders), or the last attended one (decoder embedders such as Qwen3-Embedding, whose last token has seen the rest).
 */
function pooledPositions(mask: readonly number[], pooling: Pooling): number[] {
  const attended: number[] = [];
  mask.forEach((value, t) => {
    if (value !== 0) attended.push(t);
  });
  if (pooling === 'mean' || attended.length === 0) return attended;
  return pooling === 'cls' ? [attended[0]!] : [attended[attended.length - 1]!];
}

/** The plain mean, for models configured without normalisation; no tokens gives the zero vector as normalise does. */
function mean(sum: Float64Array, count: number): Float32Array {
  const v = new Float32Array(sum.length);
  if (count === 0) return v;
  for (let d = 0; d < sum.length; d++) v[d] = sum[d]! / count;
  return v;
}

/** Little-endian hosts (every platform onnxruntime-node ships for) can write int64 values as their low 32-bit words. */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * Rows of token ids padded with `pad` to the longest row, as one [rows, length] int64 tensor. Token ids are small
 * non-negative integers, so each int64 is written as its low 32-bit word (the high word stays 0) instead of as a
 * BigInt: a BigInt per token was an allocation per token, ~9 million of them for a 100k-tool catalog.
 */
function int64Tensor(Tensor: TransformersModule['Tensor'], rows: number[][], pad: number, side: 'left' | 'right'): TensorLike {
  const length = Math.max(0, ...rows.map((row) => row.length));
  const data = new BigInt64Array(rows.length * length);
  const small = (value: number) => Number.isInteger(value) && value >= 0 && value <= 0x7fffffff;
  if (LITTLE_ENDIAN && small(pad) && rows.every((row) => row.every(small))) {
    const words = new Int32Array(data.buffer);
    if (pad !== 0) for (let i = 0; i < data.length; i++) words[2 * i] = pad;
    rows.forEach((row, r) => {
      const offset = r * length + (side === 'left' ? length - row.length : 0);
      for (let t = 0; t < row.length; t++) words[2 * (offset + t)] = row[t]!;
    });
  } else {
    data.fill(BigInt(pad));
    rows.forEach((row, r) => {
      const offset = r * length + (side === 'left' ? length - row.length : 0);
      for (let t = 0; t < row.length; t++) data[offset + t] = BigInt(row[t]!);
    });
  }
  return new Tensor('int64', data, [rows.length, length]) as unknown as TensorLike;
}

/** Distinct words remembered; a catalog's vocabulary is far smaller, so in practice nothing is dropped. */
const WORD_PIECE_CACHE = 200_000;

/**
 * WordPiece splits each word on its own, and its search for a word's pieces is quadratic in the word's length (a word
 * outside the vocabulary tries every prefix of every suffix): a fifth of indexing time with the offline model, spent
 * on the same few thousand words over and over. Remembering each word's pieces gives the same tokens.
 */
export function memoizeWordPiece(model: WordPieceModel | undefined): void {
  if (model?.config?.type !== 'WordPiece' || typeof model.encode !== 'function') return;
  const encode = model.encode.bind(model);
  const pieces = new Map<string, string[]>();
  model.encode = (words) => {
    const out: string[] = [];
    for (const word of words) {
      let known = pieces.get(word);
      if (known === undefined) {
        known = encode([word]);
        if (pieces.size >= WORD_PIECE_CACHE) pieces.clear();
        pieces.set(word, known);
      }
      for (const piece of known) out.push(piece);
    }
    return out;
  };
}

/**
 * Mean then L2 norm. The mean's 1/count cancels in the normalisation, so only the sum matters. No tokens, or only
 * zero rows ([UNK], punctuation in the offline model), would be 0/0 = NaN in the pipeline; such texts get the zero
 * vector instead (see Embedder.embed).
 */
function normalise(sum: Float64Array, count: number): Float32Array {
  const v = new Float32Array(sum.length);
  if (count === 0) return v;
  let sq = 0;
  for (let d = 0; d < sum.length; d++) sq += sum[d]! * sum[d]!;
  const n = Math.sqrt(sq);
  if (!(n > 0) || !Number.isFinite(n)) return v;
  for (let d = 0; d < sum.length; d++) v[d] = sum[d]! / n;
  return v;
}

/** Whether the options leave the model's preset (pooling, normalisation, prefixes) as it is. */
function sameAsPreset(opts: EmbedderOptions): boolean {
  return opts.pooling === undefined && opts.normalize === undefined && opts.queryPrefix === undefined && opts.documentPrefix === undefined;
}

function localModelFiles(modelDir: string): { complete: boolean; missing: string[] } {
  const missing = REQUIRED_FILES.filter((f) => !existsSync(path.join(modelDir, f)));
  if (!ONNX_DTYPES.some((dtype) => existsSync(path.join(modelDir, onnxFileOf(dtype))))) missing.push(onnxFileOf('fp32'));
  return { complete: missing.length === 0, missing };
}
