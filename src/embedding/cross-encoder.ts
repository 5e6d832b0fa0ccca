/**
 * A cross-encoder reranker run locally through transformers.js v4: the query and each tool text go through the model
 * together as a pair and its relevance logit is the score (e.g. Xenova/ms-marco-MiniLM-L-6-v2, BAAI/bge-reranker-base
 * (xlm-roberta), mixedbread-ai/mxbai-rerank-xsmall-v1 (deberta-v2)). The model is data under modelsDir, like
 * embedding models.
 */
import path from 'node:path';
import { checkModelType, chooseDtype, loadTransformers, pointAtModels, type OnnxDtype } from './runtime.js';

export interface CrossEncoderOptions {
  model: string;
  modelsDir: string;
  allowRemoteModels: boolean;
  /** The ONNX file to load (see EmbedderOptions.dtype); default: the first present, full precision first. */
  dtype?: OnnxDtype;
  /** Longest query + document pair in tokens (default: the tokenizer's model_max_length). */
  maxTokens?: number;
}

interface Logits {
  data: ArrayLike<number>;
  dims: number[];
}

type PairTokenizer = (texts: string[], options: { text_pair: string[]; padding: boolean; truncation: boolean; max_length?: number }) => unknown;
type Classifier = (inputs: unknown) => Promise<{ logits: Logits }>;

export interface CrossEncoder {
  /** Relevance logits, one per document; higher is more relevant. */
  score(query: string, documents: string[]): Promise<number[]>;
}

export async function createCrossEncoder(options: CrossEncoderOptions): Promise<CrossEncoder> {
  const modelsDir = path.resolve(options.modelsDir);
  const what = `cross-encoder "${options.model}"`;
  const tf = await loadTransformers(what);
  pointAtModels(tf, modelsDir, options.allowRemoteModels);
  const config = await tf.AutoConfig.from_pretrained(options.model);
  checkModelType(tf.AutoModelForSequenceClassification, config.model_type, what, ['bert', 'xlm-roberta', 'deberta-v2', 'modernbert', 'roberta']);
  const dtype = chooseDtype(path.join(modelsDir, options.model), options.dtype, options.allowRemoteModels) ?? 'fp32';
  const tokenizer = (await tf.AutoTokenizer.from_pretrained(options.model)) as PairTokenizer;
  const model = (await tf.AutoModelForSequenceClassification.from_pretrained(options.model, { config, dtype, device: 'cpu' })) as Classifier;
  return {
    async score(query, documents) {
      if (documents.length === 0) return [];
      const inputs = tokenizer(
        documents.map(() => query),
        { text_pair: documents, padding: true, truncation: true, ...(options.maxTokens ? { max_length: options.maxTokens } : {}) },
      );
      const { logits } = await model(inputs);
      const [rows, labels = 1] = logits.dims;
      if (rows !== documents.length) throw new Error(`cross-encoder returned ${rows} rows for ${documents.length} documents`);
      // One label: the relevance logit. Two (irrelevant, relevant): the relevant one.
      return Array.from({ length: rows }, (_, row) => Number(logits.data[row * labels + labels - 1]));
    },
  };
}
