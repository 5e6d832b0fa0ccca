import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { REPO_ROOT } from './paths.js';
import { encodeOnnxModel, OFFLINE_MODEL_ID, SPECIAL_TOKENS, tokenizerJson } from '../../src/embedding/offline-model.js';
import { ONNX_DTYPES, onnxFileOf, type OnnxDtype } from '../../src/embedding/runtime.js';

const { onnx } = onnxProto;

/**
 * Tiny transformers.js models the tests write themselves (no download): a word-vector "encoder" whose token outputs
 * are one-hot per word, so each pooling gives a vector the test can predict, and a cross-encoder-shaped classifier
 * whose logit is the sum of its words' scores. Written in the layout transformers.js loads from a models dir.
 */
/** A fresh models dir with a link to the real offline model, so a service started on it needs no rebuild. */
export function tinyModelsDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-models-'));
  const offline = path.join(dir, OFFLINE_MODEL_ID);
  mkdirSync(path.dirname(offline), { recursive: true });
  symlinkSync(path.join(REPO_ROOT, 'models', OFFLINE_MODEL_ID), offline, 'dir');
  return dir;
}

export interface TinyEncoderOptions {
  /** config.json model_type (default bert), with that architecture's config fields. */
  modelType?: TinyModelType;
  /** ONNX files written (default fp32 only). The file of ONNX_DTYPES[k] maps word i to e_{(i + k) mod n}, so a test sees which one was loaded. */
  dtypes?: OnnxDtype[];
  /** tokenizer_config.json padding_side (decoder embedders such as Qwen3 pad on the left). */
  paddingSide?: 'left' | 'right';
}

/** The model types the README lists as running in process, each with the config.json fields of its family. */
export const TINY_MODEL_TYPES = {
  bert: { architectures: ['BertModel'] },
  nomic_bert: { architectures: ['NomicBertModel'], n_embd: 0, n_head: 1, n_layer: 1, rotary_emb_fraction: 1 },
  'xlm-roberta': { architectures: ['XLMRobertaModel'], type_vocab_size: 1 },
  modernbert: { architectures: ['ModernBertModel'], global_attn_every_n_layers: 3, local_attention: 128 },
  qwen3: { architectures: ['Qwen3ForCausalLM'], num_key_value_heads: 1, head_dim: 1, num_hidden_layers: 1, num_attention_heads: 1 },
  gemma3_text: { architectures: ['Gemma3TextModel'], num_key_value_heads: 1, head_dim: 1, num_hidden_layers: 1, num_attention_heads: 1 },
} as const;
export type TinyModelType = keyof typeof TINY_MODEL_TYPES;

/**
 * Word i of `words` has the one-hot vector e_i (dimension words.length); special tokens and unknown words are 0.
 * The graph is the offline model's (a Gather of input_ids), under the config.json of any type in TINY_MODEL_TYPES:
 * transformers.js picks the model class (encoder or decoder forward) from that type alone.
 */
export function writeOneHotEncoder(modelsDir: string, modelId: string, words: string[], options: TinyEncoderOptions = {}): void {
  const rows = SPECIAL_TOKENS.length + words.length;
  const dims = words.length;
  const modelType = options.modelType ?? 'bert';
  const files: [string, Uint8Array][] = (options.dtypes ?? ['fp32']).map((dtype) => {
    const shift = ONNX_DTYPES.indexOf(dtype);
    const table = new Float32Array(rows * dims);
    words.forEach((_, i) => (table[(SPECIAL_TOKENS.length + i) * dims + ((i + shift) % dims)] = 1));
    return [onnxFileOf(dtype), encodeOnnxModel(table, rows, dims, 'fp32')];
  });
  const { architectures, ...fields } = TINY_MODEL_TYPES[modelType];
  const sized = modelType === 'nomic_bert' ? { ...fields, n_embd: dims } : fields;
  writeModel(modelsDir, modelId, words, files, { model_type: modelType, hidden_size: dims, architectures, ...sized }, options.paddingSide);
}

/** A sequence classifier with one label: logit = Σ score(word) over the query and document tokens. */
export function writeWordScoreCrossEncoder(
  modelsDir: string,
  modelId: string,
  scores: Record<string, number>,
  options: { modelType?: 'bert' | 'xlm-roberta'; dtype?: OnnxDtype } = {},
): void {
  const words = Object.keys(scores);
  const rows = SPECIAL_TOKENS.length + words.length;
  const table = new Float32Array(rows);
  words.forEach((word, i) => (table[SPECIAL_TOKENS.length + i] = scores[word]!));
  const FLOAT = onnx.TensorProto.DataType.FLOAT;
  const INT64 = onnx.TensorProto.DataType.INT64;
  const dim = (...d: (string | number)[]) => ({ dim: d.map((x) => (typeof x === 'string' ? { dimParam: x } : { dimValue: x })) });
  const model = onnx.ModelProto.create({
    irVersion: 7,
    opsetImport: [{ domain: '', version: 13 }],
    producerName: 'toolrouter-test',
    graph: {
      name: 'word_score_classifier',
      node: [
        { name: 'lookup', opType: 'Gather', input: ['scores', 'input_ids'], output: ['token_scores'], attribute: [{ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: 0 }] },
        { name: 'sum', opType: 'ReduceSum', input: ['token_scores', 'axes'], output: ['logits'], attribute: [{ name: 'keepdims', type: onnx.AttributeProto.AttributeType.INT, i: 0 }] },
      ],
      initializer: [
        { name: 'scores', dims: [rows, 1], dataType: FLOAT, rawData: new Uint8Array(table.buffer) },
        { name: 'axes', dims: [1], dataType: INT64, rawData: new Uint8Array(new BigInt64Array([1n]).buffer) },
      ],
      input: [
        { name: 'input_ids', type: { tensorType: { elemType: INT64, shape: dim('batch_size', 'sequence_length') } } },
        { name: 'attention_mask', type: { tensorType: { elemType: INT64, shape: dim('batch_size', 'sequence_length') } } },
      ],
      output: [{ name: 'logits', type: { tensorType: { elemType: FLOAT, shape: dim('batch_size', 1) } } }],
    },
  });
  const modelType = options.modelType ?? 'bert';
  writeModel(modelsDir, modelId, words, [[onnxFileOf(options.dtype ?? 'fp32'), onnx.ModelProto.encode(model).finish()]], {
    model_type: modelType,
    architectures: [modelType === 'bert' ? 'BertForSequenceClassification' : 'XLMRobertaForSequenceClassification'],
    id2label: { 0: 'LABEL_0' },
    label2id: { LABEL_0: 0 },
  });
}

function writeModel(
  modelsDir: string,
  modelId: string,
  words: string[],
  onnxFiles: [string, Uint8Array][],
  config: Record<string, unknown>,
  paddingSide: 'left' | 'right' = 'right',
): void {
  const dir = path.join(modelsDir, modelId);
  mkdirSync(path.join(dir, 'onnx'), { recursive: true });
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ model_type: 'bert', pad_token_id: 0, max_position_embeddings: 512, ...config }));
  writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson(words)));
  writeFileSync(
    path.join(dir, 'tokenizer_config.json'),
    JSON.stringify({
      tokenizer_class: 'BertTokenizer',
      do_lower_case: true,
      model_max_length: 512,
      unk_token: '[UNK]',
      pad_token: '[PAD]',
      cls_token: '[CLS]',
      sep_token: '[SEP]',
      padding_side: paddingSide,
    }),
  );
  for (const [file, bytes] of onnxFiles) writeFileSync(path.join(dir, file), bytes);
}
