/**
 * The ONNX runtime for models users bring: `@huggingface/transformers` (v4), loaded only when such a model is
 * configured. It is an optional peer dependency, not a dependency: with it come onnxruntime-node (~290 MB, every
 * platform's binaries) and onnxruntime-web (~140 MB), and onnxruntime-node's install script fetches CUDA libraries from
 * api.nuget.org on Linux x64, so an install that reaches only the npm registry fails. The offline default needs none of
 * it (a table lookup, src/embedding/offline/lookup-model.ts, tokenised by @huggingface/tokenizers).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The slice of `@huggingface/transformers` this project calls; its own typings are loose where it matters here. */
export interface TransformersModule {
  env: { allowLocalModels: boolean; allowRemoteModels: boolean; localModelPath: string; cacheDir: string | null };
  AutoConfig: { from_pretrained(id: string, options?: object): Promise<{ model_type?: string }> };
  AutoTokenizer: { from_pretrained(id: string, options?: object): Promise<unknown> };
  AutoModel: AutoClass;
  AutoModelForSequenceClassification: AutoClass;
  Tensor: new (type: string, data: ArrayLike<number | bigint>, dims: number[]) => unknown;
}

interface AutoClass {
  from_pretrained(id: string, options?: object): Promise<unknown>;
  MODEL_CLASS_MAPPINGS: Map<string, unknown>[];
}

export const TRANSFORMERS_PACKAGE = '@huggingface/transformers';

export class TransformersMissingError extends Error {
  override readonly name = 'TransformersMissingError';
}

let loaded: Promise<TransformersModule> | undefined;

/** Imports the runtime once; a clear instruction when it is not installed. */
export function loadTransformers(what: string): Promise<TransformersModule> {
  loaded ??= (import(TRANSFORMERS_PACKAGE) as Promise<TransformersModule>).catch((err: unknown) => {
    loaded = undefined;
    const code = (err as { code?: string }).code;
    if (code !== 'ERR_MODULE_NOT_FOUND' || !String((err as Error).message).includes(TRANSFORMERS_PACKAGE)) throw err;
    throw new TransformersMissingError(
      `${what} runs through ${TRANSFORMERS_PACKAGE}, which is not installed (only the offline default model works without it).\n` +
        `  Install it next to toolrouter: npm install -g ${TRANSFORMERS_PACKAGE}@4 (or npm install ${TRANSFORMERS_PACKAGE}@4 in your project);\n` +
        `  where only the npm registry is reachable, prefix ONNXRUNTIME_NODE_INSTALL=skip (onnxruntime-node otherwise fetches CUDA libraries from api.nuget.org).\n` +
        `  Or use an embeddings server: embedding.provider "openai" with embedding.baseUrl.`,
      { cause: err },
    );
  });
  return loaded;
}

/** transformers.js keeps these in one global `env`; set before every load (loads are serialised by the callers). */
export function pointAtModels(tf: TransformersModule, modelsDir: string, allowRemoteModels: boolean): void {
  tf.env.allowLocalModels = true;
  tf.env.localModelPath = modelsDir;
  tf.env.allowRemoteModels = allowRemoteModels;
  // A download is cached under cacheDir/<model id>/..., i.e. exactly where the next start looks for local files.
  tf.env.cacheDir = modelsDir;
}

/** ONNX weight precisions a model folder may offer, and the file each one is (transformers.js naming). */
export const ONNX_DTYPES = ['fp32', 'fp16', 'q8', 'q4'] as const;
export type OnnxDtype = (typeof ONNX_DTYPES)[number];
const DTYPE_FILE: Record<OnnxDtype, string> = { fp32: 'model.onnx', fp16: 'model_fp16.onnx', q8: 'model_quantized.onnx', q4: 'model_q4.onnx' };

export function onnxFileOf(dtype: OnnxDtype): string {
  return `onnx/${DTYPE_FILE[dtype]}`;
}

/**
 * The dtype to load from `modelDir`: the configured one (its file must be there, unless it may be downloaded), else
 * the first file present in the order fp32, q8, fp16, q4 (full precision first: what the model was trained in).
 * undefined when no ONNX file is present locally.
 */
export function chooseDtype(modelDir: string, requested: OnnxDtype | undefined, allowRemote: boolean): OnnxDtype | undefined {
  const present = ONNX_DTYPES.filter((dtype) => existsSync(path.join(modelDir, onnxFileOf(dtype))));
  if (requested) {
    if (!present.includes(requested) && !allowRemote && present.length > 0) {
      throw new Error(
        `embedding.dtype "${requested}" needs ${onnxFileOf(requested)} in ${modelDir}, which offers ${present.map((d) => `${d} (${onnxFileOf(d)})`).join(', ')}`,
      );
    }
    return requested;
  }
  return (['fp32', 'q8', 'fp16', 'q4'] as const).find((dtype) => present.includes(dtype));
}

/** model_type from a local config.json, when there is one. */
export function localModelType(modelDir: string): string | undefined {
  try {
    const config = JSON.parse(readFileSync(path.join(modelDir, 'config.json'), 'utf8')) as { model_type?: unknown };
    return typeof config.model_type === 'string' ? config.model_type : undefined;
  } catch {
    return undefined;
  }
}

/** Model types an auto class can load, sorted. */
export function supportedModelTypes(auto: AutoClass): string[] {
  return [...new Set(auto.MODEL_CLASS_MAPPINGS.flatMap((mapping) => [...mapping.keys()]))].sort();
}

/**
 * Refuses a model type the runtime has no class for. transformers.js's AutoModel would otherwise load it as a bare
 * PreTrainedModel and fail later, or run it with the wrong inputs; here the start fails with the type named.
 */
export function checkModelType(auto: AutoClass, modelType: string | undefined, what: string, typical: string[]): void {
  const supported = supportedModelTypes(auto);
  if (modelType !== undefined && supported.includes(modelType)) return;
  const shown = typical.filter((type) => supported.includes(type));
  throw new Error(
    `${what}: model type ${modelType === undefined ? '(config.json names none)' : `"${modelType}"`} cannot be loaded by ` +
      `${TRANSFORMERS_PACKAGE} (${supported.length} types, e.g. ${shown.join(', ')}); ` +
      `convert the model to a supported architecture, or serve it from an embeddings server (embedding.provider "openai")`,
  );
}
