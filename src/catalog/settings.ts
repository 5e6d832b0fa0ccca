/** The catalog's settings (YAML `catalog`, `limits`): schemas and defaults, assembled by `src/config/`. */
import { z } from 'zod';

const toolSchema = z.looseObject({ name: z.string() });

export const catalogSettingsSchema = z
  .object({
    separator: z.string().max(8).default('__'),
    /** Static sources loaded at start: source name → MCP tools, or `{description, tools}` to say what the source is for. */
    sources: z
      .record(
        z.string(),
        z.union([z.array(toolSchema), z.object({ description: z.string().max(2_000).optional(), tools: z.array(toolSchema) }).strict()]),
      )
      .default({}),
  })
  .prefault({});

/**
 * Bounds on untrusted structure, checked before any work is done on it (src/http/json-depth.ts,
 * src/catalog/schema-limits.ts): a request over one is a 400 that changes nothing.
 */
export const limitsSettingsSchema = z
  .object({
    /** Deepest nesting of arrays and objects in any JSON request body (every route, chat proxy included). */
    jsonDepth: z.number().int().min(8).max(10_000).default(64),
    /** Largest tool inputSchema/outputSchema, as JSON text. */
    schemaBytes: z.number().int().min(1_024).max(100_000_000).default(256 * 1024),
    /** Most entries of any one array inside a schema (`enum`, `required`, `anyOf`, `items` lists...). */
    schemaArrayItems: z.number().int().min(1).max(10_000_000).default(1_000),
    /** Most keys of any one object inside a schema (`properties`, `$defs`...). */
    schemaObjectKeys: z.number().int().min(1).max(10_000_000).default(1_000),
    /** Longest `pattern` / `patternProperties` regular expression in a schema (run with RE2). */
    schemaPatternLength: z.number().int().min(1).max(1_000_000).default(1_000),
  })
  .prefault({});

export type CatalogSettings = z.infer<typeof catalogSettingsSchema>;
export type LimitsSettings = z.infer<typeof limitsSettingsSchema>;

/** A configured static source's tools and description, whichever form it was written in. */
export function staticSourceEntry(entry: CatalogSettings['sources'][string]): { tools: unknown[]; description?: string } {
  return Array.isArray(entry) ? { tools: entry } : entry;
}
