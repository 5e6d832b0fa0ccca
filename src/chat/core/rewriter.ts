import { Access } from '../../auth/access.js';
import type { Catalog, CatalogEntry } from '../../catalog/catalog.js';
import type { Embedder } from '../../embedding/embedder.js';
import { ActivationPolicy, decideActivation, type Activation, type ActivationThresholds } from '../../search/activation.js';
import { SearchService, type SearchMode, type SearchObservation } from '../../search/search.js';
import { toolTokens, totalTokens } from '../../search/tokens.js';
import { conversationQuery } from './query.js';
import {
  capKept,
  keepAll,
  requiredTools,
  selectRequestTools,
  stickyOrder,
  toolLabel,
  type DroppedTool,
  type KeptTool,
  type RuleReason,
  type UnchangedReason,
} from './select.js';
import type { FunctionTool, ToolIndex, ToolIndexCache } from './tool-index-cache.js';
import type { Api, RequestTool, ToolRequest } from './tool-request.js';
import type { Tool } from '../../catalog/types.js';

export interface RewriteOptions {
  /** A catalog (MCP) tool in the request's API format, for catalog mode (the request's dialect: Dialect.renderTool). */
  renderTool: (tool: Tool) => object;
  /** Ranked tools to keep; rule-kept tools come on top. */
  k: number;
  /** Rank the router's own catalog instead of the request's tools. */
  useCatalog: boolean;
  /** Who asks: catalog mode only ever adds tools this caller's key may see. */
  access?: Access;
  /** Tools forwarded in an earlier turn of this conversation, in that order: kept, and forwarded first. */
  sticky?: readonly string[];
  /** Most tools forwarded, whatever keeps them (chat.maxTools, less any slot the caller reserves). */
  maxTools?: number;
  /**
   * The caller adds its search tool to a trimmed request: when no tool reaches search.minScore (the calibrated
   * relevance, src/search/calibration.ts) only the rule-kept and sticky tools are forwarded, and the model searches.
   * Without it a request where nothing fits keeps the top k, as a guess is better than no tools at all.
   */
  abstain?: boolean;
}

export interface Decision {
  /** The API the request came in: `chat` (/v1/chat/completions), `responses` (/v1/responses), `anthropic` (/v1/messages). */
  api: Api;
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
  /**
   * Whether the tool list is big enough to trim (search.activation, the same measure as the MCP gateway's
   * `search: "auto"`): over the request's function tools, or in catalog mode over the catalog plus the request's own.
   */
  activation: Activation;
  /** Whether the request's tool list was already indexed; absent when no index was needed. */
  cache?: 'hit' | 'miss';
}

export interface Rewrite {
  /** The body to forward; undefined when the request goes upstream exactly as it came. */
  body: Record<string, unknown> | undefined;
  decision: Decision;
}

/** What a ToolRewriter ranks with, handed in by the chat routes. */
export interface ToolRewriterOptions {
  /**
   * The router's catalog and search: catalog mode searches it, and its current defaults (weights and fusion as the
   * console may have applied them) rank request tools too.
   */
  catalog: Catalog;
  search: SearchService;
  embedder: Embedder;
  cache: ToolIndexCache;
  /** When a tool list is big enough to trim at all (search.activation). */
  activation: ActivationThresholds;
  maxQueryLength: number;
}

/**
 * Decides which tools a request forwards, whatever API it came in (each dialect's parser turns its format into a
 * ToolRequest), ranking with the same hybrid search as the rest of the router.
 */
export class ToolRewriter {
  private readonly mode: SearchMode;
  /**
   * Catalog mode's size check, which remembers the catalog's token count by its hash. Always 'auto': whoever wants
   * every request trimmed sets both thresholds to 0.
   */
  private readonly activation: ActivationPolicy;

  constructor(private readonly options: ToolRewriterOptions) {
    // Regex mode reads the query as a pattern; a conversation is prose.
    this.mode = options.search.settings.mode === 'regex' ? 'hybrid' : options.search.settings.mode;
    this.activation = new ActivationPolicy('auto', options.activation);
  }

  async rewrite(request: ToolRequest, options: RewriteOptions): Promise<Rewrite> {
    const access = options.access ?? Access.open;
    const rewrite = options.useCatalog
      ? await this.fromCatalog(request, options.k, access, options.renderTool)
      : await this.fromRequest(request, options.k, access.scope, options.sticky ?? [], options.abstain ?? false);
    return this.cap(request, rewrite, options.maxTools);
  }

  /**
   * The request as it came, for when search cannot run (an index not ready, the embeddings provider down): the model
   * gets every tool rather than none, still within maxTools.
   */
  unranked(request: ToolRequest, options: RewriteOptions): Rewrite {
    const required = requiredTools(request, this.options.search.settings.pinned);
    const functions = request.tools.filter((tool) => tool.function !== undefined).length;
    const activation = decideActivation('auto', this.options.activation, functions, () => totalTokens(request.tools.map((tool) => tool.definition)));
    return this.cap(request, this.unchanged(request, options.k, required, 'search_unavailable', '', undefined, activation), options.maxTools);
  }

  /**
   * The request's function tools that best match `query`, for the proxy's search tool: at most `topK`, none of
   * `exclude` (already forwarded), none the caller's key may not see (a request tool that is a catalog tool outside
   * the key), and none scoring below search.minScore: like REST and MCP, the search tool abstains when nothing fits
   * rather than handing the model unrelated tools (issue 42).
   */
  async findRequestTools(request: ToolRequest, query: string, topK: number, exclude: ReadonlySet<string>, access: Access): Promise<RequestTool[]> {
    const functions = request.tools.filter((tool): tool is FunctionTool => tool.function !== undefined);
    const { catalog } = this.options;
    const visible = (name: string) => {
      if (!access.restricted) return true;
      const entry = catalog.get(name);
      return entry === undefined || access.canSee(entry);
    };
    const { index } = await this.options.cache.get(functions);
    const { results } = await this.requestSearch(index, topK, exclude.size).search({
      query,
      topK,
      mode: this.mode,
      visible: (entry) => !exclude.has(entry.tool.name) && visible(entry.tool.name),
      feedbackScope: access.scope,
      minScore: this.options.search.settings.minScore ?? 0,
      observe: observation('proxy_search', access.scope),
    });
    const byName = new Map(functions.map((tool) => [tool.function.name, tool]));
    return results.flatMap((hit) => {
      const tool = byName.get(hit.tool.name);
      return tool ? [tool] : [];
    });
  }

  /** Search over one request's tool index with the router's current defaults. */
  private requestSearch(index: ToolIndex, k: number, excluded: number): SearchService {
    const settings = this.options.search.settings;
    const { feedback, metrics, observer } = this.options.search;
    return new SearchService({
      catalog: index.catalog,
      indexes: index.indexes,
      embedder: this.options.embedder,
      // Feedback is by tool name: what conversations called for similar queries counts for the request's tools too.
      ...(feedback ? { feedback } : {}),
      ...(metrics ? { metrics } : {}),
      // The search log records the proxy's rankings over a request's own tools as it does catalog searches.
      ...(observer ? { observer } : {}),
      settings: {
        ...settings,
        mode: this.mode,
        topK: k,
        maxTopK: k,
        // Excluded tools are filtered out after ranking, so rank enough candidates to still fill k.
        candidates: Math.max(settings.candidates, k + excluded),
        // Pinned tools are a keep-rule here; the request's own search must not hide them.
        pinned: [],
        // The request's tools fill k; whether nothing fits at all (abstaining) is decided on the top score (fromRequest).
        minScore: 0,
      },
    });
  }

  /** The request forwarded with every tool, each with its keep reason. */
  private unchanged(
    request: ToolRequest,
    k: number,
    required: ReadonlyMap<string, RuleReason>,
    reason: UnchangedReason,
    query: string,
    cache: 'hit' | 'miss' | undefined,
    activation: Activation,
  ): Rewrite {
    const { tools } = request;
    const tokens = totalTokens(tools.map((tool) => tool.definition));
    return {
      body: undefined,
      decision: {
        api: request.api,
        mode: 'request',
        k,
        query,
        changed: false,
        total: tools.length,
        kept: keepAll(tools, required, reason),
        dropped: [],
        tokens: { before: tokens, after: tokens, saved: 0 },
        activation,
        ...(cache ? { cache } : {}),
      },
    };
  }

  /**
   * A request forwarded with every tool, in a conversation that forwarded some of them before: those go first, in the
   * order they went then, and the rest after them in request order (stickyOrder), so the tools block stays the stable
   * prefix it was (upstream prompt caching) even when the kept and new tools cover the whole list. Recorded as the
   * conversation's selection like any rewrite. Unchanged when the caller's order already is that order.
   */
  private keepPrefix(request: ToolRequest, rewrite: Rewrite, earlier: readonly string[]): Rewrite {
    if (earlier.length === 0 || rewrite.body !== undefined) return rewrite;
    const items = request.tools.map((tool, position) => ({ tool, kept: rewrite.decision.kept[position]! }));
    const ordered = stickyOrder(items, (item) => item.kept.name, earlier);
    if (ordered.every((item, position) => item === items[position])) return rewrite;
    return {
      body: { ...request.body, tools: ordered.map((item) => item.tool.definition) },
      decision: { ...rewrite.decision, changed: true, kept: ordered.map((item) => item.kept) },
    };
  }

  /** At most `max` tools forwarded, whatever kept them (src/chat/core/select.ts capKept says which go first). */
  private cap(request: ToolRequest, rewrite: Rewrite, max = Number.POSITIVE_INFINITY): Rewrite {
    const { decision } = rewrite;
    const definitions = rewrite.body ? ((rewrite.body.tools as unknown[] | undefined) ?? []) : request.tools.map((tool) => tool.definition);
    const { keep, dropped } = capKept(decision.kept, max);
    if (dropped.length === 0 || definitions.length !== decision.kept.length) return rewrite;
    const forwarded = definitions.filter((_definition, position) => keep[position]);
    const after = totalTokens(forwarded);
    return {
      body: { ...(rewrite.body ?? request.body), tools: forwarded },
      decision: {
        ...decision,
        changed: true,
        kept: decision.kept.filter((_tool, position) => keep[position]),
        dropped: [...decision.dropped, ...dropped],
        tokens: { before: decision.tokens.before, after, saved: Math.max(0, decision.tokens.before - after) },
      },
    };
  }

  private async fromRequest(request: ToolRequest, k: number, scope: string | undefined, earlier: readonly string[], abstain: boolean): Promise<Rewrite> {
    const { tools } = request;
    const settings = this.options.search.settings;
    const required = requiredTools(request, settings.pinned);
    const functions = tools.filter((tool): tool is FunctionTool => tool.function !== undefined);
    const requiredHere = functions.filter((tool) => required.has(tool.function.name)).length;
    const functionNames = new Set(functions.map((tool) => tool.function.name));
    const sticky = new Set(earlier.filter((name) => functionNames.has(name) && !required.has(name)));
    // Token counts are memoised per definition (src/search/tokens.ts), and only lists within maxTools are counted.
    const activation = decideActivation('auto', this.options.activation, functions.length, () => totalTokens(functions.map((tool) => tool.definition)));
    const unchanged = (reason: UnchangedReason, query = '', cache?: 'hit' | 'miss'): Rewrite =>
      this.keepPrefix(request, this.unchanged(request, k, required, reason, query, cache, activation), earlier);
    // A small list costs less than a search would save: the model sees it whole.
    if (!activation.active) return unchanged('below_threshold');
    // Nothing could be dropped: forwarded as is, without indexing anything.
    if (functions.length - requiredHere - sticky.size <= k) return unchanged('within_k');
    const query = conversationQuery(request.turns, this.options.maxQueryLength);
    if (query === '') return unchanged('no_query');

    const { index, hit } = await this.options.cache.get(functions);
    const ranked = await this.requestSearch(index, k, requiredHere + sticky.size).search({
      query,
      topK: k,
      mode: this.mode,
      visible: (entry) => !required.has(entry.tool.name) && !sticky.has(entry.tool.name),
      feedbackScope: scope,
      observe: observation('proxy', scope),
    });
    const cache = hit ? 'hit' : 'miss';
    if (ranked.results.length === 0) return unchanged('no_match', query, cache);
    // Scores are calibrated and ranked best first: the top one below min_score means nothing in the list fits.
    const results = abstain && ranked.results[0]!.score < (settings.minScore ?? 0) ? [] : ranked.results;

    const selection = selectRequestTools(
      tools,
      required,
      results.map((hit) => ({ name: hit.tool.name, score: hit.score })),
      sticky,
    );
    const keptTools = tools.filter((_tool, position) => selection.keep[position]);
    const ordered = stickyOrder(
      keptTools.map((tool, position) => ({ tool, kept: selection.kept[position]! })),
      (item) => item.kept.name,
      earlier,
    );
    const forwarded = ordered.map((item) => item.tool.definition);
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
        api: request.api,
        mode: 'request',
        k,
        query,
        changed: true,
        total: tools.length,
        kept: ordered.map((item) => item.kept),
        dropped: selection.dropped,
        tokens: { before, after, saved: before - after },
        activation,
        cache,
      },
    };
  }

  /**
   * Catalog mode: the request's tools are replaced by the catalog's best matches for the conversation. Tools the
   * keep-rules name stay: the request's own definition when it has one, else the catalog's. When the catalog and the
   * request's own functions together are below the activation threshold, nothing is trimmed: the request keeps its
   * tools and gets every catalog tool besides.
   */
  private async fromCatalog(request: ToolRequest, k: number, access: Access, renderTool: RewriteOptions['renderTool']): Promise<Rewrite> {
    const { catalog, search } = this.options;
    const { settings } = search;
    // The catalog as this caller's key sees it: a tool outside the key is never added, by rule or by rank.
    const visible = (entry: CatalogEntry | undefined): entry is CatalogEntry => entry !== undefined && access.canSee(entry);
    const required = requiredTools(request, settings.pinned);
    const query = conversationQuery(request.turns, this.options.maxQueryLength);
    const extras = request.tools.filter((tool) => tool.function && !visible(catalog.get(tool.function.name)));
    const snapshot = catalog.snapshot();
    const entries = access.restricted ? snapshot.entries.filter(visible) : snapshot.entries;
    const activation = this.activation.decidePool(entries.length + extras.length, [
      // The catalog's definitions in this API's format are counted once per catalog hash (which covers searchable
      // text: a change to schema types alone keeps the old count, off by a few tokens until the next real change) and key.
      { key: () => `${snapshot.catalogHash}:${request.api}:${access.scope ?? ''}`, definitions: () => entries.map((entry) => renderTool(entry.tool)) },
      { definitions: () => extras.map((tool) => tool.definition) },
    ]);
    const trim = activation.active;
    const forwarded: unknown[] = [];
    const kept: KeptTool[] = [];
    const dropped: DroppedTool[] = [];
    const taken = new Set<string>();
    for (const tool of request.tools) {
      const name = toolLabel(tool);
      const rule = tool.function ? required.get(name) : undefined;
      if (tool.function && !rule && trim) {
        dropped.push({ name, reason: 'replaced_by_catalog' });
        continue;
      }
      forwarded.push(tool.definition);
      kept.push({ name, reason: rule ?? (tool.function ? 'below_threshold' : 'not_a_function'), source: 'request' });
      taken.add(name);
    }
    const fromCatalog = (name: string, reason: KeptTool['reason']) => {
      const entry = taken.has(name) ? undefined : catalog.get(name);
      if (!visible(entry)) return;
      forwarded.push(renderTool(entry.tool));
      kept.push({ name, reason, source: 'catalog' });
      taken.add(name);
    };
    for (const [name, reason] of required as Map<string, RuleReason>) fromCatalog(name, reason);
    if (!trim) {
      for (const entry of entries) fromCatalog(entry.tool.name, 'below_threshold');
    } else if (query !== '') {
      const { results } = await search.search({
        query,
        topK: k,
        mode: this.mode,
        visible: (entry) => !taken.has(entry.tool.name) && access.canSee(entry),
        feedbackScope: access.scope,
        observe: observation('proxy', access.scope),
      });
      for (const hit of results) {
        forwarded.push(renderTool(hit.tool));
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
        api: request.api,
        mode: 'catalog',
        k,
        query,
        changed: true,
        // What this caller's key may see: a restricted key learns nothing of the catalog's size beyond it.
        total: entries.length + extras.length,
        kept,
        dropped,
        tokens: { before, after, saved: Math.max(0, before - after) },
        activation,
      },
    };
  }
}

/** The search log's note of a proxy search: its surface and the caller's key. */
function observation(surface: 'proxy' | 'proxy_search', key: string | undefined): SearchObservation {
  return key === undefined ? { surface } : { surface, key };
}
