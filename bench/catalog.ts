/**
 * Synthetic-but-realistic catalogs for the benchmark: real tool definitions (LiveMCPBench's 527 tools when
 * `../shared/datasets/livemcpbench/tools.json` exists, the project fixture otherwise) varied into as many distinct
 * tools as asked for. Variant k of a tool gets a suffixed name, its own description followed by a clause taken from
 * another real tool, and its own parameters plus one parameter borrowed from a third tool. Deterministic: the same
 * seed and count always give the same catalog, and every tool's searchable text differs (so a cold build embeds
 * every tool).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { JsonSchemaProperty, Tool } from '../src/catalog/types.js';
import { loadCatalogFile } from '../src/eval/datasets.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const LIVEMCPBENCH = path.resolve(ROOT, '../shared/datasets/livemcpbench/tools.json');
export const FIXTURE = path.join(ROOT, 'test/fixtures/catalog.json');

/** The real tools the generator varies, and where they came from. */
export function baseTools(): { tools: Tool[]; source: string } {
  if (existsSync(LIVEMCPBENCH)) return { tools: loadCatalogFile(LIVEMCPBENCH), source: 'LiveMCPBench tools.json (527 real MCP tools)' };
  return { tools: loadCatalogFile(FIXTURE), source: 'test/fixtures/catalog.json (project fixture)' };
}

/** mulberry32: small, fast, seedable. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const QUALIFIERS = ['v2', 'pro', 'eu', 'us', 'beta', 'lite', 'cloud', 'local', 'team', 'legacy', 'next', 'edge'];

function firstClause(text: string | undefined): string {
  const clause = (text ?? '').split(/(?<=[.!?])\s|\n/)[0]?.trim() ?? '';
  return clause.length > 160 ? `${clause.slice(0, 160)}…` : clause;
}

const FLAT_TYPES = new Set(['string', 'number', 'integer', 'boolean']);
const FLAT_KEYS = new Set(['type', 'description', 'default', 'title']);

function isFlat(schema: JsonSchemaProperty): boolean {
  return typeof schema.type === 'string' && FLAT_TYPES.has(schema.type) && Object.keys(schema).every((key) => FLAT_KEYS.has(key));
}

/** `count` distinct tools varied from `base`; variant 0 of each base tool is the tool itself. */
export function generateCatalog(count: number, seed = 42, base: readonly Tool[] = baseTools().tools): Tool[] {
  if (base.length === 0) throw new Error('no base tools to vary');
  const random = rng(seed);
  const pick = () => base[Math.floor(random() * base.length)]!;
  const tools: Tool[] = [];
  for (let i = 0; i < count; i += 1) {
    const original = base[i % base.length]!;
    const variant = Math.floor(i / base.length);
    if (variant === 0) {
      tools.push(original);
      continue;
    }
    const qualifier = QUALIFIERS[variant % QUALIFIERS.length]!;
    const donor = pick();
    const paramDonor = pick();
    const suffix = `_${qualifier}${variant}`;
    const name = `${original.name.slice(0, 128 - suffix.length)}${suffix}`;
    const borrowed = firstClause(donor.description);
    const description = [original.description?.trim(), borrowed ? `Also: ${borrowed}` : '', `(${qualifier} edition ${variant})`]
      .filter(Boolean)
      .join(' ');
    const properties: Record<string, JsonSchemaProperty> = { ...(original.inputSchema.properties ?? {}) };
    // Only flat parameters travel: nested schemas may use another JSON Schema draft than the tool they join.
    const donorProps = Object.entries(paramDonor.inputSchema.properties ?? {}).filter(([, schema]) => isFlat(schema));
    if (donorProps.length > 0) {
      const [param, schema] = donorProps[Math.floor(random() * donorProps.length)]!;
      if (!(param in properties)) properties[param] = schema;
    }
    tools.push({ ...original, name, description, inputSchema: { ...original.inputSchema, type: 'object', properties } });
  }
  return tools;
}
