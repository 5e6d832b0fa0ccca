import type { Access } from '../../auth/access.js';
import type { CatalogEntry } from '../../catalog/catalog.js';
import { totalTokens } from '../../search/tokens.js';
import { countToolTokens, type TokenCounters } from '../../telemetry/token-accounting.js';

/**
 * Tool-definition tokens on the MCP face: listed (every tool the caller may call, what a plain aggregator would put in
 * the model's context) at each first tools/list page, against served (the definitions tools/list pages and
 * search_tools answers actually returned). The listed count is remembered per catalog snapshot and caller, so a
 * tools/list costs the count once per catalog change.
 */
export class McpTokenAccounting {
  private readonly listedTokens = new WeakMap<object, WeakMap<Access, number>>();

  constructor(private readonly counters: TokenCounters) {}

  /** One tools/list page; `snapshot` is the catalog's when this is a first page without a query (a full listing). */
  listed(access: Access, page: readonly unknown[], snapshot: object | undefined, callable: () => readonly CatalogEntry[]): void {
    const offered = snapshot === undefined ? 0 : this.listedFor(snapshot, access, callable);
    countToolTokens(this.counters, 'mcp', access, { offered, forwarded: totalTokens(page) });
  }

  /** Definitions a search_tools answer served (scores left out: they are not part of a definition). */
  served(access: Access, tools: readonly { score?: number; scores?: unknown }[]): void {
    countToolTokens(this.counters, 'mcp', access, { offered: 0, forwarded: totalTokens(tools.map(({ score: _score, scores: _scores, ...tool }) => tool)) });
  }

  private listedFor(snapshot: object, access: Access, callable: () => readonly CatalogEntry[]): number {
    let byAccess = this.listedTokens.get(snapshot);
    if (!byAccess) this.listedTokens.set(snapshot, (byAccess = new WeakMap()));
    let tokens = byAccess.get(access);
    if (tokens === undefined) byAccess.set(access, (tokens = totalTokens(callable().map((entry) => entry.tool))));
    return tokens;
  }
}
