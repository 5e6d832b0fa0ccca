import { z } from 'zod';
import { ToolrouterError } from '../errors.js';

/**
 * The one rule for fusion weights and methods. Config, the settings API, search requests, tuning and the CLI all
 * validate with these schemas, so a weight accepted in one place is accepted everywhere, with the same message.
 */

export const FUSION_METHODS = ['weighted', 'rrf'] as const;
export type FusionMethod = (typeof FUSION_METHODS)[number];

export interface FusionWeights {
  bm25: number;
  vector: number;
  /** The feedback signal (src/feedback); absent means the feedback service's configured weight. */
  feedback?: number;
}

/** Weights are relative, so no real setting needs more; the bound keeps sums and products finite. */
export const MAX_WEIGHT = 1000;

/** Complete weights need something to rank by: feedback alone only re-orders what BM25 or vectors found. */
export const WEIGHTS_RULE = 'at least one of bm25 and vector must be positive';

export const weightSchema = z
  .number({ error: 'must be a number' })
  .finite('must be a finite number')
  .min(0, 'must be 0 or more')
  .max(MAX_WEIGHT, `must be at most ${MAX_WEIGHT}`);

export const fusionMethodSchema = z.enum(FUSION_METHODS, { error: `must be ${FUSION_METHODS.join(' or ')}` });

/** Weights a request or a settings change gives: any of the three, merged over the current ones (see `mergeWeights`). */
export const weightsUpdateSchema = z
  .object(
    { bm25: weightSchema.optional(), vector: weightSchema.optional(), feedback: weightSchema.optional() },
    { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object {bm25, vector, feedback}' : undefined) },
  )
  .strict();

/** Complete weights (bm25 and vector given), with the rule checked. */
export const weightsSchema = z
  .object({ bm25: weightSchema, vector: weightSchema, feedback: weightSchema.optional() })
  .strict()
  .refine((weights) => isUsable(weights), WEIGHTS_RULE);

/** Complete weights where left-out fields take `defaults` (the config file's `search.weights`). */
export function weightsWithDefaults(defaults: FusionWeights) {
  return z
    .object({
      bm25: weightSchema.default(defaults.bm25),
      vector: weightSchema.default(defaults.vector),
      feedback: weightSchema.optional(),
    })
    .strict()
    .refine((weights) => isUsable(weights), WEIGHTS_RULE);
}

/** Bad weights given to code rather than through a schema (a settings change, a Redis announcement): a 400, not a 500. */
export class InvalidWeightsError extends ToolrouterError {
  constructor(message: string) {
    super('invalid_request', `weights: ${message}`, { param: 'weights' });
  }
}

/** `update` over `base`, checked against the rule; throws InvalidWeightsError naming what is wrong. */
export function mergeWeights(base: FusionWeights, update: Partial<FusionWeights> | undefined): FusionWeights {
  const merged = { ...base, ...update };
  for (const key of ['bm25', 'vector', 'feedback'] as const) {
    const value = merged[key];
    if (value === undefined && key === 'feedback') continue;
    const checked = weightSchema.safeParse(value);
    if (!checked.success) throw new InvalidWeightsError(`${key} ${checked.error.issues[0]?.message ?? 'is invalid'}`);
  }
  if (!isUsable(merged)) throw new InvalidWeightsError(WEIGHTS_RULE);
  return merged;
}

function isUsable(weights: FusionWeights): boolean {
  return weights.bm25 + weights.vector > 0;
}
