/**
 * Reproductions of the peer tool rankers toolrouter is measured against (SPEC, "Reference rankers to beat"). They
 * are re-implementations from the published behaviour, not the peers' code; each keeps the peer's quirks (token
 * rules, zero-score filtering, tie order) because matching their numbers matters more than improving them.
 */
import type { Tool } from '../catalog/types.js';

/** FastMCP's tokenizer: lowercase, split on `[^a-z0-9]+`, keep tokens longer than one character. */
export function fastMcpTokenize(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((token) => token.length > 1);
}

/** FastMCP's searchable text: name, description, then each parameter name and its description. */
export function fastMcpDocument(tool: Tool): string {
  const parts = [tool.name];
  if (tool.description) parts.push(tool.description);
  const properties = tool.inputSchema?.properties;
  if (properties && typeof properties === 'object') {
    for (const [param, info] of Object.entries(properties)) {
      parts.push(param);
      const description = (info as { description?: unknown } | null)?.description;
      if (typeof description === 'string' && description) parts.push(description);
    }
  }
  return parts.join(' ');
}

/**
 * Reproduction of FastMCP's `BM25SearchTransform`: Okapi BM25 with k1 = 1.5, b = 0.75 and
 * idf = ln((N − df + 0.5) / (df + 0.5) + 1) over {@link fastMcpDocument}. As in FastMCP, a token repeated in the
 * query contributes once per occurrence, only documents with a positive score are returned, and equal scores keep
 * catalog order. Unlike FastMCP, which scores every document per query term, postings lists make a query cost
 * proportional to the matching documents, so 100k-tool catalogs stay usable.
 */
export class FastMcpBm25 {
  static readonly k1 = 1.5;
  static readonly b = 0.75;

  private readonly names: string[];
  private readonly postings = new Map<string, { docs: Uint32Array; tfs: Uint32Array }>();
  /** Per-document BM25 length normalisation k1·(1 − b + b·dl/avgdl), precomputed once. */
  private readonly norm: Float64Array;
  private readonly scores: Float64Array;

  constructor(tools: readonly Tool[]) {
    this.names = tools.map((tool) => tool.name);
    const n = tools.length;
    const lengths = new Uint32Array(n);
    const building = new Map<string, { docs: number[]; tfs: number[] }>();
    let total = 0;
    tools.forEach((tool, doc) => {
      const tokens = fastMcpTokenize(fastMcpDocument(tool));
      lengths[doc] = tokens.length;
      total += tokens.length;
      const tf = new Map<string, number>();
      for (const token of tokens) tf.set(token, (tf.get(token) ?? 0) + 1);
      for (const [token, count] of tf) {
        let list = building.get(token);
        if (!list) building.set(token, (list = { docs: [], tfs: [] }));
        list.docs.push(doc);
        list.tfs.push(count);
      }
    });
    for (const [token, list] of building) {
      this.postings.set(token, { docs: Uint32Array.from(list.docs), tfs: Uint32Array.from(list.tfs) });
    }
    const avgdl = n > 0 ? total / n : 0;
    this.norm = new Float64Array(n);
    const { k1, b } = FastMcpBm25;
    // FastMCP divides by avgdl unguarded; an all-empty catalog has no postings, so norm is never read then.
    for (let doc = 0; doc < n; doc += 1) this.norm[doc] = k1 * (1 - b + (avgdl > 0 ? (b * lengths[doc]!) / avgdl : 0));
    this.scores = new Float64Array(n);
  }

  /** Names of the top `k` tools by BM25 score, best first. */
  search(query: string, k: number): string[] {
    return this.searchWithScores(query, k).map((hit) => hit.name);
  }

  /** As {@link search}, with each tool's BM25 score (for inspecting why a query ranks as it does). */
  searchWithScores(query: string, k: number): { name: string; score: number }[] {
    const n = this.names.length;
    const scores = this.scores;
    const touched: number[] = [];
    const { k1 } = FastMcpBm25;
    for (const token of fastMcpTokenize(query)) {
      const list = this.postings.get(token);
      if (!list) continue;
      const df = list.docs.length;
      const idf = Math.log((n - df + 0.5) / (df + 0.5) + 1);
      for (let i = 0; i < df; i += 1) {
        const doc = list.docs[i]!;
        const tf = list.tfs[i]!;
        if (scores[doc] === 0) touched.push(doc);
        scores[doc]! += (idf * tf * (k1 + 1)) / (tf + this.norm[doc]!);
      }
    }
    const ranked = touched.filter((doc) => scores[doc]! > 0);
    ranked.sort((a, b) => scores[b]! - scores[a]! || a - b);
    const result = ranked.slice(0, Math.max(0, k)).map((doc) => ({ name: this.names[doc]!, score: scores[doc]! }));
    // The score buffer is reused across queries; clearing only what was touched keeps a query O(matches).
    for (const doc of touched) scores[doc] = 0;
    return result;
  }
}

/**
 * Reproduction of LiteLLM's tool-search token overlap: the score of a tool is the number of whitespace-separated
 * lowercase query tokens that occur as substrings of `lower(name + " " + description)`. A token repeated in the
 * query counts each time; tools scoring zero are dropped and ties keep catalog order. There is no index to build:
 * substring matching needs a scan of every tool per query token.
 */
export class LiteLlmTokenOverlap {
  private readonly names: string[];
  private readonly texts: string[];

  constructor(tools: readonly Tool[]) {
    this.names = tools.map((tool) => tool.name);
    this.texts = tools.map((tool) => `${tool.name} ${tool.description ?? ''}`.toLowerCase());
  }

  search(query: string, k: number): string[] {
    const tokens = query.toLowerCase().split(/\s+/).filter((token) => token !== '');
    if (tokens.length === 0) return [];
    const scored: { doc: number; score: number }[] = [];
    this.texts.forEach((text, doc) => {
      let score = 0;
      for (const token of tokens) if (text.includes(token)) score += 1;
      if (score > 0) scored.push({ doc, score });
    });
    scored.sort((a, b) => b.score - a.score || a.doc - b.doc);
    return scored.slice(0, Math.max(0, k)).map(({ doc }) => this.names[doc]!);
  }
}
