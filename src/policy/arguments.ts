import type { CedarValueJson } from '@cedar-policy/cedar-wasm/nodejs';

/** Deepest nesting kept as Cedar values; deeper parts become their JSON text. */
export const MAX_ARGUMENT_DEPTH = 16;
/** Most values (of any kind) converted per call; the rest of a larger argument tree is left out. */
export const MAX_ARGUMENT_VALUES = 10_000;

/**
 * A call's arguments as a Cedar record. Cedar holds strings, booleans, 64-bit integers, sets and records; anything else
 * becomes a string: a fraction or an integer beyond Cedar's range its decimal text, null `"null"`. Arrays become sets.
 * An object with a key Cedar's JSON reads as an escape (`__entity`, `__extn`, `__expr`) becomes its JSON text, so
 * arguments can never name an entity or call an extension.
 */
export function cedarArguments(args: Record<string, unknown> | undefined): Record<string, CedarValueJson> {
  const budget = { left: MAX_ARGUMENT_VALUES };
  const record = convert(args ?? {}, 0, budget);
  return typeof record === 'object' && record !== null && !Array.isArray(record) ? (record as Record<string, CedarValueJson>) : {};
}

const ESCAPES = new Set(['__entity', '__extn', '__expr']);

function convert(value: unknown, depth: number, budget: { left: number }): CedarValueJson | undefined {
  if (budget.left <= 0) return undefined;
  budget.left--;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      // JSON numbers are doubles: only integers JavaScript holds exactly are Cedar Longs.
      return Number.isSafeInteger(value) ? value : String(value);
    case 'bigint':
      return value.toString();
    case 'object': {
      if (value === null) return 'null';
      if (depth >= MAX_ARGUMENT_DEPTH) return jsonText(value);
      if (Array.isArray(value)) {
        const items: CedarValueJson[] = [];
        for (const item of value) {
          const converted = convert(item, depth + 1, budget);
          if (converted !== undefined) items.push(converted);
        }
        return items;
      }
      const keys = Object.keys(value);
      if (keys.some((key) => ESCAPES.has(key))) return jsonText(value);
      const record: Record<string, CedarValueJson> = {};
      for (const key of keys) {
        const converted = convert((value as Record<string, unknown>)[key], depth + 1, budget);
        if (converted !== undefined) record[key] = converted;
      }
      return record;
    }
    default:
      return undefined;
  }
}

function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '';
  }
}
