/**
 * A cross-encoder reranker run locally through transformers.js: the query and each tool text go through the model
 * together as a pair and its relevance logit is the score (e.g. Xenova/ms-marco-MiniLM-L-6-v2, BAAI/bge-reranker-base,
 * mixedbread-ai/mxbai-rerank-xsmall-v1). The model is data under modelsDir, like embedding models.
 */
import path from 'node:path';
import { AutoModelForSequenceClassification, AutoTokenizer, env } from '@xenova/transformers';

export interface CrossEncoderOptions {
  model: string;
  modelsDir: string;
  allowRemoteModels: boolean;
  quantized?: boolean;
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
  env.allowLocalModels = true;
  env.localModelPath = modelsDir;
  env.allowRemoteModels = options.allowRemoteModels;
  env.cacheDir = modelsDir;
  const tokenizer = (await AutoTokenizer.from_pretrained(options.model)) as unknown as PairTokenizer;
  const model = (await AutoModelForSequenceClassification.from_pretrained(options.model, {
    quantized: options.quantized ?? false,
  })) as unknown as Classifier;
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
