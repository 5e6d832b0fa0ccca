/**
 * The embedder's settings (YAML `embedding`): schema and defaults. The default models directory depends on where the
 * package is installed, so the assembly (src/config/) hands it in rather than this module looking it up.
 */
import { z } from 'zod';
import { OFFLINE_MODEL_ID } from './embedder.js';
import { ONNX_DTYPES } from './runtime.js';

export function embeddingSettingsSchema(defaults: { modelsDir: () => string }) {
  return z
    .object({
      /** `transformers`: a local transformers.js model; `openai`: an OpenAI-compatible POST /v1/embeddings server. */
      provider: z.enum(['transformers', 'openai']).default('transformers'),
      model: z.string().min(1).default(OFFLINE_MODEL_ID),
      /** Default: handed in (defaultModelsDir(): the package's models/, or the user's cache when that is not writable). */
      modelsDir: z.string().default(defaults.modelsDir),
      allowRemoteModels: z.boolean().default(false),
      batchSize: z.number().int().min(1).max(4096).default(64),
      // Per-model settings; unset fields come from the model's preset (src/embedding/presets.ts).
      pooling: z.enum(['mean', 'cls', 'last']).optional(),
      normalize: z.boolean().optional(),
      queryPrefix: z.string().max(1_000).optional(),
      documentPrefix: z.string().max(1_000).optional(),
      maxTokens: z.number().int().min(1).max(131_072).optional(),
      /** The ONNX file of the model folder: fp32 model.onnx, fp16 model_fp16.onnx, q8 model_quantized.onnx, q4 model_q4.onnx. */
      dtype: z.enum(ONNX_DTYPES).optional(),
      /** Older spelling of dtype: true = q8, false = fp32. */
      quantized: z.boolean().optional(),
      // The openai provider.
      baseUrl: z.string().url().optional(),
      /** From EMBEDDING_API_KEY; keep it out of config files. */
      apiKey: z.string().min(1).optional(),
      dimensions: z.coerce.number().int().min(1).max(65_536).optional(),
      concurrency: z.number().int().min(1).max(64).default(4),
      retries: z.number().int().min(0).max(20).default(4),
      timeoutMs: z.number().int().min(1).max(600_000).default(30_000),
      /** Failed requests in a row after which queries do not ask the provider for cooldownMs (searches use BM25 at once). */
      failuresBeforeCooldown: z.number().int().min(1).max(1_000).default(3),
      cooldownMs: z.number().int().min(0).max(600_000).default(10_000),
    })
    .prefault({})
    .refine((embedding) => embedding.provider !== 'openai' || embedding.baseUrl !== undefined, {
      message: 'embedding.provider "openai" needs embedding.baseUrl (EMBEDDING_BASE_URL)',
      path: ['baseUrl'],
    })
    .refine((embedding) => embedding.provider !== 'openai' || embedding.model !== OFFLINE_MODEL_ID, {
      message: 'embedding.provider "openai" needs embedding.model (EMBEDDING_MODEL) set to the server\'s model name',
      path: ['model'],
    });
}

export type EmbeddingSettings = z.infer<ReturnType<typeof embeddingSettingsSchema>>;
