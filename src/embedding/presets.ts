/**
 * How well-known embedding models expect to be used: pooling, and the prefixes (or instructions) queries and
 * documents get. A model trained with `query: ` / `passage: ` and embedded without them loses several points of
 * recall, so these are applied by default; every field can be overridden in `embedding`.
 */
export type Pooling = 'mean' | 'cls' | 'last';

export interface ModelSettings {
  pooling: Pooling;
  normalize: boolean;
  queryPrefix: string;
  documentPrefix: string;
}

export const DEFAULT_MODEL_SETTINGS: ModelSettings = { pooling: 'mean', normalize: true, queryPrefix: '', documentPrefix: '' };

const BGE_QUERY = 'Represent this sentence for searching relevant passages: ';

/** Matched against the model id's last path part, lower-cased, so `Xenova/…` and `BAAI/…` exports share a preset. */
const PRESETS: { pattern: RegExp; settings: Partial<ModelSettings> }[] = [
  { pattern: /^(multilingual-)?e5-/, settings: { pooling: 'mean', queryPrefix: 'query: ', documentPrefix: 'passage: ' } },
  { pattern: /^bge-.*-zh/, settings: { pooling: 'cls', queryPrefix: '为这个句子生成表示以用于检索相关文章：' } },
  { pattern: /^bge-m3/, settings: { pooling: 'cls' } },
  { pattern: /^bge-/, settings: { pooling: 'cls', queryPrefix: BGE_QUERY } },
  { pattern: /^(snowflake-)?arctic-embed/, settings: { pooling: 'cls', queryPrefix: BGE_QUERY } },
  { pattern: /^mxbai-embed/, settings: { pooling: 'cls', queryPrefix: BGE_QUERY } },
  { pattern: /^(nomic-embed-text|modernbert-embed)/, settings: { pooling: 'mean', queryPrefix: 'search_query: ', documentPrefix: 'search_document: ' } },
  // ModernBERT- and multilingual gte models take [CLS], unlike the BERT-based gte-small/base/large (mean, below).
  { pattern: /^gte-(modernbert|multilingual)/, settings: { pooling: 'cls' } },
  {
    pattern: /^qwen3-embedding/,
    settings: { pooling: 'last', queryPrefix: 'Instruct: Given a task description, retrieve the tool that performs it\nQuery:' },
  },
  { pattern: /^embeddinggemma/, settings: { pooling: 'mean', queryPrefix: 'task: search result | query: ', documentPrefix: 'title: none | text: ' } },
  { pattern: /^(all-minilm|all-mpnet|paraphrase-|multi-qa-|gte-)/, settings: { pooling: 'mean' } },
];

/** The preset for a model id (defaults for unknown ids), with the configured fields on top. */
export function modelSettings(modelId: string, overrides: Partial<ModelSettings> = {}): ModelSettings {
  const base = modelId.split('/').pop()!.toLowerCase();
  const preset = PRESETS.find(({ pattern }) => pattern.test(base))?.settings ?? {};
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined));
  return { ...DEFAULT_MODEL_SETTINGS, ...preset, ...defined };
}
