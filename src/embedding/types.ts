/**
 * The embedding seam every provider implements and every user of vectors reads: here, below both the providers
 * (src/embedding/openai.ts, the transformers.js one in embedder.ts) and `createEmbedder`, which picks one.
 */

/** What a text is embedded as: models trained with prefixes (e5, bge, nomic...) embed queries and documents differently. */
export type EmbedRole = 'query' | 'document';

export interface EmbedOptions {
  /** Default `document`. */
  role?: EmbedRole;
  /** Abandons the call (a query embedding past the search timeout); providers that cannot cancel ignore it. */
  signal?: AbortSignal;
}

export interface Embedder {
  /** The index identity: an index built with another model id is not searched with this embedder. */
  readonly modelId: string;
  /**
   * What the embedding cache is keyed by next to the text hash: provider, model, dimensions and document prefix, so
   * a vector made any other way is never reused.
   */
  readonly cacheKey: string;
  readonly dimensions: number;
  /**
   * L2-normalised vectors, one per text, same order. A text with nothing the model can represent (empty,
   * whitespace, or only words outside the offline model's vocabulary) gets an all-zero vector: it has cosine 0
   * with everything instead of NaN, so it can be stored and compared but never ranks above a real match.
   */
  embed(texts: string[], options?: EmbedOptions): Promise<Float32Array[]>;
  /**
   * Set when this embedder is plain JavaScript over files (the offline model's table lookup, no onnxruntime and no
   * network): the options `createEmbedder` makes the very same embedder from in another thread, so an index build can
   * embed there instead of on the thread that answers requests.
   */
  readonly threadable?: ThreadableEmbedder;
}

/** What a worker thread passes to `createEmbedder` to get an embedder giving the same vectors (structured-clonable). */
export interface ThreadableEmbedder {
  model: string;
  modelsDir: string;
  allowRemoteModels: false;
  batchSize: number;
  maxTokens?: number;
}
