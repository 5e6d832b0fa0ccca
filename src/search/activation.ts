import { createHash } from 'node:crypto';
import { totalTokens } from './tokens.js';

/**
 * When tool search pays off. A few small tools are best shown to the model directly: a search round trip costs more
 * than their definitions. Past a tool count or a token budget of definitions, showing everything crowds the context
 * and hurts tool choice, so search takes over. The MCP gateway (`mcp.search: "auto"`) and the chat / responses
 * rewriters ask this one module, so a catalog is "big" by the same measure everywhere.
 */

/** `true`/`false` force search on or off; `auto` decides from the tool list. */
export type SearchActivationSetting = boolean | 'auto';

export interface ActivationThresholds {
  /** Search activates when the list has more tools than this. */
  maxTools: number;
  /** ...or when its definitions take more prompt tokens than this (o200k_base, each definition as JSON). */
  maxTokens: number;
}

export const DEFAULT_ACTIVATION_THRESHOLDS: ActivationThresholds = { maxTools: 10, maxTokens: 10_000 };

/**
 * - `forced`: the setting is true or false.
 * - `tool_count`: more tools than `maxTools`.
 * - `token_budget`: definitions over `maxTokens`.
 * - `below_threshold`: small enough to show as is.
 */
export type ActivationReason = 'forced' | 'tool_count' | 'token_budget' | 'below_threshold';

export interface Activation {
  active: boolean;
  reason: ActivationReason;
  tools: number;
  /** Tokens of the definitions; absent when the answer did not need them (forced, or over the tool count). */
  tokens?: number;
}

/**
 * The decision for a list of `count` tool definitions. `tokens` is only called when the count alone does not decide,
 * so it never runs over a list longer than `maxTools`: cheap even for a huge catalog.
 */
export function decideActivation(
  setting: SearchActivationSetting,
  thresholds: ActivationThresholds,
  count: number,
  tokens: () => number,
): Activation {
  if (setting !== 'auto') return { active: setting, reason: 'forced', tools: count };
  if (count > thresholds.maxTools) return { active: true, reason: 'tool_count', tools: count };
  const used = tokens();
  return used > thresholds.maxTokens
    ? { active: true, reason: 'token_budget', tools: count, tokens: used }
    : { active: false, reason: 'below_threshold', tools: count, tokens: used };
}

/** Token counts of whole lists remembered; a few lists (one per visibility) are asked about over and over. */
const LIST_MEMO_SIZE = 256;

/** Part of a tool list, its definitions made only if its tokens must be counted. */
export interface ListPart {
  /**
   * Names this part's content (e.g. a catalog hash); its token count is remembered under it. A function, as the key
   * itself is only needed when tokens are.
   */
  key?: (() => string) | undefined;
  definitions: () => readonly unknown[];
}

/**
 * `decideActivation` over tool definitions, remembering token counts of whole lists by a key (a catalog hash, or
 * else a hash of the definitions), so a list shown on every tools/list is counted once per change, not per request.
 */
export class ActivationPolicy {
  private readonly listTokens = new Map<string, number>();

  constructor(
    readonly setting: SearchActivationSetting,
    readonly thresholds: ActivationThresholds,
  ) {}

  /**
   * The decision for one list, as the caller would see it (after any visibility filter). `key`, when given, names the
   * list's content (say, a hash of its tools' catalog hashes), which saves hashing the definitions.
   */
  decide(definitions: readonly unknown[], key?: () => string): Activation {
    return this.decidePool(definitions.length, [{ key, definitions: () => definitions }]);
  }

  /** The decision for `count` tools made of parts (say, a catalog and a request's own tools). */
  decidePool(count: number, parts: readonly ListPart[]): Activation {
    return decideActivation(this.setting, this.thresholds, count, () => {
      let tokens = 0;
      for (const part of parts) tokens += this.tokensOf(part);
      return tokens;
    });
  }

  private tokensOf(part: ListPart): number {
    const definitions = part.key === undefined ? part.definitions() : undefined;
    const key = part.key?.() ?? createHash('sha256').update(JSON.stringify(definitions)).digest('base64url');
    const known = this.listTokens.get(key);
    if (known !== undefined) return known;
    const count = totalTokens(definitions ?? part.definitions());
    // Oldest first out: Map iteration order is insertion order.
    if (this.listTokens.size >= LIST_MEMO_SIZE) this.listTokens.delete(this.listTokens.keys().next().value!);
    this.listTokens.set(key, count);
    return count;
  }
}
