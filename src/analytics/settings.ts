/** Analytics' settings (YAML `analytics`): schema over `AnalyticsSettings` and its defaults. Assembled by `src/config/`. */
import { z } from 'zod';
import { DEFAULT_ANALYTICS_SETTINGS, type AnalyticsSettings } from './types.js';

/** The search log (src/analytics): every search, what it found and which tool was then called. */
export const analyticsSettingsSchema = z
  .object({
    enabled: z.boolean().default(DEFAULT_ANALYTICS_SETTINGS.enabled),
    queries: z.enum(['full', 'hash', 'off']).default(DEFAULT_ANALYTICS_SETTINGS.queries),
    // Bounded: the summary and the traffic evaluation read every kept search.
    maxEntries: z.number().int().min(1).max(1_000_000).default(DEFAULT_ANALYTICS_SETTINGS.maxEntries),
    maxAgeDays: z.number().positive().max(3650).default(DEFAULT_ANALYTICS_SETTINGS.maxAgeDays),
  })
  .prefault({}) satisfies z.ZodType<AnalyticsSettings>;

export type { AnalyticsSettings };

/** Compile-time check that the schema yields exactly `AnalyticsSettings`: no field missing, none extra. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _analyticsIsAnalyticsSettings: Same<z.output<typeof analyticsSettingsSchema>, AnalyticsSettings> = true;
