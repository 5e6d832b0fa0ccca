import type { Counter } from 'prom-client';

/**
 * Tool-definition tokens in the running service: what a caller offered (its request's tools; on MCP, every tool the
 * caller may call, what an aggregator would list) against what reached the model (forwarded upstream; on MCP, the
 * definitions served by tools/list and search_tools). The difference is what toolrouter saved.
 */

/** The faces tokens are counted on: the chat-completions and Responses proxies, and the MCP gateway. */
export type TokenFace = 'chat' | 'responses' | 'messages' | 'mcp';

/** The proxy's response header: `<forwarded>/<offered>` tool-definition tokens, as the header x-toolrouter-tools counts tools. */
export const TOKENS_HEADER = 'x-toolrouter-tokens';

export function tokensHeader(forwarded: number, offered: number): string {
  return `${forwarded}/${offered}`;
}

/** Distinct key labels a registry gives their own series; keys past it share `other`, so a key flood cannot grow /metrics. */
export const MAX_KEY_LABELS = 100;

/**
 * Bounded label values: the first `max` distinct values are themselves, later ones `other`. Keys are few and
 * long-lived in practice; the bound protects the scrape, not the accuracy of a normal deployment.
 */
export class BoundedLabels {
  private readonly seen = new Set<string>();
  constructor(private readonly max: number) {}

  label(value: string): string {
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.max) return 'other';
    this.seen.add(value);
    return value;
  }
}

/** Who asked, as a label: the virtual key's id, else the kind of caller (admin, open, anonymous). */
export interface TokenCaller {
  kind: string;
  key?: { keyId: string };
}

export interface TokenCounters {
  toolTokensOffered: Counter<'face' | 'key'>;
  toolTokensForwarded: Counter<'face' | 'key'>;
  tokenKeyLabels: BoundedLabels;
}

export function countToolTokens(metrics: TokenCounters | undefined, face: TokenFace, caller: TokenCaller, tokens: { offered: number; forwarded: number }): void {
  if (!metrics) return;
  const labels = { face, key: metrics.tokenKeyLabels.label(caller.key ? `key:${caller.key.keyId}` : caller.kind) };
  if (tokens.offered > 0) metrics.toolTokensOffered.inc(labels, tokens.offered);
  if (tokens.forwarded > 0) metrics.toolTokensForwarded.inc(labels, tokens.forwarded);
}
