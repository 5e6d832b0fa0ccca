/**
 * The configuration's JSON Schema (draft 2020-12), derived from `configSchema`, the zod schema `serve` validates with,
 * so editors (`# yaml-language-server: $schema=...`) and the generated reference (docs/configuration.md) can never
 * describe another configuration than the one the service accepts.
 */
import { z } from 'zod';
import { configSchema } from './config.js';
import { SETTING_DESCRIPTIONS } from './setting-descriptions.js';

type JsonSchema = Record<string, unknown>;

/** Where the committed copy lives in the repository (`npm run docs:config` writes it). */
export const CONFIG_SCHEMA_FILE = 'docs/config.schema.json';

/**
 * The schema of a configuration file as written (zod's input side: defaults are not required), with two corrections
 * that keep it exactly as strict as `validateConfig`:
 * - plain zod objects strip unknown keys, and `validateConfig` reports every such key as an error; here they get
 *   `additionalProperties: false`, so an editor flags `mcp.serverz` as the service does;
 * - each setting carries the comment its zod schema has in the sources (setting-descriptions.ts, generated), for
 *   editors' hovers and the reference page;
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
  describe(schema, '');
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

/** Each setting's description from its source comment, by the path the reference page names it with. */
function describe(schema: JsonSchema, at: string): void {
  const text = at ? SETTING_DESCRIPTIONS[at] : undefined;
  if (text !== undefined && schema.description === undefined) schema.description = text;
  const child = (name: string) => (at ? `${at}.${name}` : name);
  for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, JsonSchema>)) describe(property, child(name));
  const values = schema.additionalProperties;
  if (typeof values === 'object' && values !== null) describe(values as JsonSchema, child('<name>'));
  const items = schema.items;
  if (typeof items === 'object' && items !== null && !Array.isArray(items)) describe(items as JsonSchema, `${at}[]`);
  for (const option of ((schema.anyOf ?? schema.oneOf ?? []) as JsonSchema[])) describeBranch(option, at, describe);
}

/** A union's branch: its settings are the union's (no description of its own, the union has it). */
function describeBranch(branch: JsonSchema, at: string, walk: (schema: JsonSchema, at: string) => void): void {
  const own = branch.description;
  walk(branch, at);
  if (own === undefined) delete branch.description;
}
