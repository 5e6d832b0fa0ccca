/** Feedback's settings (YAML `feedback`): schema over `FeedbackSettings` and its defaults. Assembled by `src/config/`. */
import { z } from 'zod';
import { DEFAULT_FEEDBACK_SETTINGS, type FeedbackSettings } from './types.js';

/** Learning from usage (src/feedback): tools called for similar past queries are boosted in hybrid search. */
export const feedbackSettingsSchema = z
  .object({
    enabled: z.boolean().default(DEFAULT_FEEDBACK_SETTINGS.enabled),
    /** Fusion weight of the feedback signal next to search.weights; per request as weights.feedback. */
    weight: z.number().min(0).max(1000).default(DEFAULT_FEEDBACK_SETTINGS.weight),
    isolation: z.enum(['global', 'key']).default(DEFAULT_FEEDBACK_SETTINGS.isolation),
    halfLifeDays: z.number().positive().default(DEFAULT_FEEDBACK_SETTINGS.halfLifeDays),
    maxEvents: z.number().int().min(1).max(10_000_000).default(DEFAULT_FEEDBACK_SETTINGS.maxEvents),
    maxAgeDays: z.number().positive().default(DEFAULT_FEEDBACK_SETTINGS.maxAgeDays),
    neighbours: z.number().int().min(1).max(1_000).default(DEFAULT_FEEDBACK_SETTINGS.neighbours),
    minSimilarity: z.number().min(-1).max(1).default(DEFAULT_FEEDBACK_SETTINGS.minSimilarity),
    maxBoost: z.number().positive().default(DEFAULT_FEEDBACK_SETTINGS.maxBoost),
  })
  .prefault({}) satisfies z.ZodType<FeedbackSettings>;

export type { FeedbackSettings };

/** Compile-time check that the schema yields exactly `FeedbackSettings`: no field missing, none extra. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _feedbackIsFeedbackSettings: Same<z.output<typeof feedbackSettingsSchema>, FeedbackSettings> = true;
