import type { Catalog } from '../catalog/catalog.js';
import type { Embedder } from '../embedding/embedder.js';
import { SearchService, type SearchMode, type SearchSettings } from '../search/search.js';
import { conversationQuery } from './query.js';
import type { ChatRequest } from './request.js';
import {
  keepAll,
  requiredTools,
  selectRequestTools,
  toolLabel,
  type DroppedTool,
  type KeptTool,
  type RuleReason,
} from './rewrite.js';
import type { FunctionTool, ToolIndexCache } from './tool-index-cache.js';
import { openAiFunctionTool } from './tools.js';
import { toolTokens, totalTokens } from './tokens.js';

export interface RewriteOptions {
  /** Ranked tools to keep; rule-kept tools come on top. */
  k: number;
  /** Rank the router's own catalog instead of the request's tools. */
  useCatalog: boolean;
}

export interface Decision {
  mode: 'request' | 'catalog';
  k: number;
  /** The query the tools were ranked with ('' when none was needed or possible). */
  query: string;
  /** Whether the forwarded request differs from the caller's. */
  changed: boolean;
  /** Tools the request carried; in catalog mode, the tools there were to choose from (catalog and request). */
  total: number;
  kept: KeptTool[];
  dropped: DroppedTool[];
  /** Prompt tokens of the tool definitions in the caller's request and in the forwarded one. */
  tokens: { before: number; after: number; saved: number };
  /** Whether the request's tool list was already indexed; absent when no index was needed. */
  cache?: 'hit' | 'miss';
}

export interface Rewrite {
  /** The body to forward; undefined when the request goes upstream exactly as it came. */
  body: Record<string, unknown> | undefined;
  decision: Decision;
}

export interface ChatRewriterDeps {
  /** The router's catalog and search, for catalog mode. */
  catalog: Catalog;
  search: SearchService;
  embedder: Embedder;
  cache: ToolIndexCache;
  settings: SearchSettings;
  maxQueryLength: number;
}

/** Decides which tools a chat-completion request forwards, ranking with the same hybrid search as the rest of the router. */
export class ChatRewriter {
  private readonly mode: SearchMode;

  constructor(private readonly deps: ChatRewriterDeps) {
    // Regex mode reads the query as a pattern; a conversation is prose.
    this.mode = deps.settings.mode === 'regex' ? 'hybrid' : deps.settings.mode;
  }

  rewrite(request: ChatRequest, options: RewriteOptions): Promise<Rewrite> {
    return options.useCatalog ? this.fromCatalog(request, options.k) : this.fromRequest(request, options.k);
  }

  private async fromRequest(request: ChatRequest, k: number): Promise<Rewrite> {
    const { tools } = request;
    const required = requiredTools(request, this.deps.settings.pinned);
    const functions = tools.filter((tool): tool is FunctionTool => tool.function !== undefined);
    const requiredHere = functions.filter((tool) => required.has(tool.function.name)).length;
    const unchanged = (reason: 'within_k' | 'no_query' | 'no_match', query = '', cache?: 'hit' | 'miss'): Rewrite => {
      const tokens = totalTokens(tools.map((tool) => tool.definition));
      return {
        body: undefined,
        decision: {
          mode: 'request',
          k,
          query,
          changed: false,
          total: tools.length,
          kept: keepAll(tools, required, reason),
          dropped: [],
          tokens: { before: tokens, after: tokens, saved: 0 },
          ...(cache ? { cache } : {}),
        },
      };
    };
    // Nothing could be dropped: forwarded as is, without indexing anything.
    if (functions.length - requiredHere <= k) return unchanged('within_k');
    const query = conversationQuery(request.messages, this.deps.maxQueryLength);
    if (query === '') return unchanged('no_query');

    const { index, hit } = await this.deps.cache.get(functions);
    const search = new SearchService(index.catalog, index.indexes, this.deps.embedder, {
      ...this.deps.settings,
      mode: this.mode,
      topK: k,
      maxTopK: k,
      // Rule-kept tools are filtered out after ranking, so rank enough candidates to still fill k.
      candidates: Math.max(this.deps.settings.candidates, k + requiredHere),
      // Pinned tools are a keep-rule here; the request's own search must not hide them.
      pinned: [],
    });
    const { results } = await search.search({
      query,
      topK: k,
      mode: this.mode,
      visible: (entry) => !required.has(entry.tool.name),
    });
    const cache = hit ? 'hit' : 'miss';
    if (results.length === 0) return unchanged('no_match', query, cache);

    const selection = selectRequestTools(
      tools,
      required,
      results.map((hit) => ({ name: hit.tool.name, score: hit.score })),
    );
    const forwarded = tools.filter((_tool, position) => selection.keep[position]).map((tool) => tool.definition);
    // Function tools' counts come with the cached index; only other kinds (rare, always kept) are counted here.
    const functionTokens = new Map(functions.map((tool, i) => [tool, index.tokens[i]!]));
    let before = 0;
    let after = 0;
    tools.forEach((tool, position) => {
      const tokens = functionTokens.get(tool as FunctionTool) ?? toolTokens(tool.definition);
      before += tokens;
      if (selection.keep[position]) after += tokens;
    });
    return {
      body: { ...request.body, tools: forwarded },
      decision: {
        mode: 'request',
        k,
        query,
        changed: true,
        total: tools.length,
        kept: selection.kept,
        dropped: selection.dropped,
        tokens: { before, after, saved: before - after },
        cache,
      },
    };
  }

  /**
   * Catalog mode: the request's tools are replaced by the catalog's best matches for the conversation. Tools the
   * keep-rules name stay: the request's own definition when it has one, else the catalog's.
   */
  private async fromCatalog(request: ChatRequest, k: number): Promise<Rewrite> {
    const { catalog, search, settings } = this.deps;
    const required = requiredTools(request, settings.pinned);
    const query = conversationQuery(request.messages, this.deps.maxQueryLength);
    const forwarded: unknown[] = [];
    const kept: KeptTool[] = [];
    const dropped: DroppedTool[] = [];
    const taken = new Set<string>();
    let poolExtra = 0;
    for (const tool of request.tools) {
      const name = toolLabel(tool);
      const rule = tool.function ? required.get(name) : undefined;
      if (tool.function && !catalog.get(name)) poolExtra++;
      if (tool.function && !rule) {
        dropped.push({ name, reason: 'replaced_by_catalog' });
        continue;
      }
      forwarded.push(tool.definition);
      kept.push({ name, reason: rule ?? 'not_a_function', source: 'request' });
      taken.add(name);
    }
    for (const [name, reason] of required as Map<string, RuleReason>) {
      const entry = taken.has(name) ? undefined : catalog.get(name);
      if (!entry) continue;
      forwarded.push(openAiFunctionTool(entry.tool));
      kept.push({ name, reason, source: 'catalog' });
      taken.add(name);
    }
    if (query !== '') {
      const { results } = await search.search({ query, topK: k, mode: this.mode, visible: (entry) => !taken.has(entry.tool.name) });
      for (const hit of results) {
        forwarded.push(openAiFunctionTool(hit.tool));
        kept.push({ name: hit.tool.name, reason: 'ranked', score: hit.score, source: 'catalog' });
      }
    }
    const body: Record<string, unknown> = { ...request.body, tools: forwarded };
    if (forwarded.length === 0) {
      // OpenAI rejects an empty tools list, and these parameters without one; no tool fits this conversation.
      delete body.tools;
      delete body.tool_choice;
      delete body.parallel_tool_calls;
    }
    const before = totalTokens(request.tools.map((tool) => tool.definition));
    const after = totalTokens(forwarded);
    return {
      body,
      decision: {
        mode: 'catalog',
        k,
        query,
        changed: true,
        total: catalog.size + poolExtra,
        kept,
        dropped,
        tokens: { before, after, saved: Math.max(0, before - after) },
      },
    };
  }
}
