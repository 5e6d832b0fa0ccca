import { countTokens } from 'gpt-tokenizer';

/** Definitions whose count is remembered; a busy proxy sees the same few tool lists over and over. */
const MEMO_SIZE = 4_096;
const memo = new Map<string, number>();

/**
 * Prompt tokens of one tool definition, counted as its JSON in `o200k_base` (the GPT-4o / GPT-4.1 / o-series
 * encoding, gpt-tokenizer's default). JSON is what most chat templates put in the prompt; OpenAI renders functions
 * more compactly, so for OpenAI models this is an upper estimate, but the same one for kept and dropped tools.
 */
export function toolTokens(definition: unknown): number {
  const json = JSON.stringify(definition);
  const known = memo.get(json);
  if (known !== undefined) return known;
  const count = countTokens(json);
  // Oldest first out: Map iteration order is insertion order.
  if (memo.size >= MEMO_SIZE) memo.delete(memo.keys().next().value!);
  memo.set(json, count);
  return count;
}

export function totalTokens(definitions: readonly unknown[]): number {
  let total = 0;
  for (const definition of definitions) total += toolTokens(definition);
  return total;
}
