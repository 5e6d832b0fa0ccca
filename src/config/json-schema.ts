/**
 * The configuration's JSON Schema (draft 2020-12), derived from `configSchema`, the zod schema `serve` validates with,
 * so editors (`# yaml-language-server: $schema=...`) and the generated reference (docs/configuration.md) can never
 * describe another configuration than the one the service accepts.
 */
import { z } from 'zod';
import { configSchema } from './config.js';

type JsonSchema = Record<string, unknown>;

/** Where the committed copy lives in the repository (`npm run docs:config` writes it). */
export const CONFIG_SCHEMA_FILE = 'docs/config.schema.json';

/**
 * The schema of a configuration file as written (zod's input side: defaults are not required), with two corrections
 * that keep it exactly as strict as `validateConfig`:
 * - plain zod objects strip unknown keys, and `validateConfig` reports every such key as an error; here they get
 *   `additionalProperties: false`, so an editor flags `mcp.serverz` as the service does;
 * - defaults computed on this machine (`embedding.modelsDir`: where the package is installed) are not written down.
 */
export function configJsonSchema(): JsonSchema {
  const generated = z.toJSONSchema(configSchema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const schema: JsonSchema = {
    $schema: generated.$schema,
    title: 'toolrouter configuration',
    description: 'A toolrouter configuration file (YAML or JSON). Every setting is optional; environment variables win over the file.',
    ...Object.fromEntries(Object.entries(generated).filter(([key]) => key !== '$schema')),
  };
  closeObjects(schema);
  const properties = schema.properties as Record<string, JsonSchema>;
  // Read before validation and folded into `redis.url` (src/config/config.ts configInput), so a file may still carry it.
  properties.redisUrl = { type: 'string', format: 'uri', deprecated: true, description: 'older spelling of redis.url' };
  const embedding = (properties.embedding?.properties ?? {}) as Record<string, JsonSchema>;
  if (embedding.modelsDir) {
    delete embedding.modelsDir.default;
    embedding.modelsDir.description = "default: the package's models/ directory when it exists or can be created, else $XDG_CACHE_HOME/toolrouter/models";
  }
  return schema;
}

/** `additionalProperties: false` on every object that names its properties and says nothing of others. */
function closeObjects(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) closeObjects(item);
    return;
  }
  if (typeof node !== 'object' || node === null) return;
  const schema = node as JsonSchema;
  if (schema.type === 'object' && schema.properties !== undefined && !('additionalProperties' in schema)) schema.additionalProperties = false;
  for (const value of Object.values(schema)) closeObjects(value);
}
