import { createHash } from 'node:crypto';
import { DEFAULT_TASKS_OPTIONS, GatewayTasks, type GatewayTasksOptions, type GatewayTasksState } from '../relay/tasks.js';
import { LogLevels } from '../relay/levels.js';
import type { TaskInputs } from '../relay/task-inputs.js';
import { EventEmitter } from 'node:events';
import {
  CompleteResultSchema,
  GetPromptResultSchema,
  ReadResourceResultSchema,
  type CallToolResult,
  type CompleteResult,
  type GetPromptResult,
  type Prompt,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplate,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { Access } from '../../auth/access.js';
import { ToolrouterError, type ErrorCode } from '../../errors.js';
import { catalogHash, type Catalog, type CatalogEntry, type CatalogSnapshot } from '../../catalog/catalog.js';
import { compileSchema, type SchemaValidator } from '../../catalog/json-schema.js';
import type { Tool } from '../../catalog/types.js';
import { ActivationPolicy, type Activation, type ActivationThresholds, type SearchActivationSetting } from '../../search/activation.js';
import { IndexNotReadyError, type SearchService } from '../../search/search.js';
import { describeCoverage } from '../../search/coverage.js';
import { INDEX_BUILDING, NO_SERVERS } from './guidance.js';
import type { StartupGate, UpstreamNotes } from './startup.js';
import { UpstreamError, type FeaturesChange, type UpstreamConnection, type UpstreamManager, type UpstreamProgress } from '../upstream/index.js';
import type { FeedbackRecorder } from '../../feedback/service.js';
import { SearchLedger } from './feedback-capture.js';
import { MemorySearchStore, type SearchStore } from '../../state/searches.js';
import { mcpClientToolSpan } from '../../telemetry/spans.js';
import type { McpTokenAccounting } from './token-accounting.js';
import type { RelayContext } from '../relay/channel.js';
import { Governance, GovernanceError, type GovernanceOptions } from './governance.js';
import type { AuditSurface } from '../../audit/types.js';
import type { PolicyTarget } from '../../policy/types.js';

export interface GatewaySettings {
  /**
   * false: a plain aggregator, every callable tool in tools/list and no virtual tools. true: pinned + virtual tools.
   * 'auto': the aggregator while the callable tools fit `activation`, pinned + virtual tools beyond.
   */
  search: SearchActivationSetting;
  activation: ActivationThresholds;
  searchToolName: string;
  callToolName: string;
  callTimeoutMs: number;
  pageSize: number;
  /** Most tools a query returns over all pages. */
  queryLimit: number;
  maxQueryLength: number;
  /** Between server and tool name (catalog.separator); '' when names are not namespaced. */
  separator: string;
  /** Bounds of the task store; absent: its defaults. */
  tasks?: Partial<GatewayTasksOptions>;
}

export type GatewayErrorCode = Extract<
  ErrorCode,
  | 'unknown_tool'
  | 'not_found'
  | 'invalid_arguments'
  | 'recursion'
  | 'invalid_cursor'
  | 'forbidden'
  | 'index_not_ready'
  | 'upstream_timeout'
  | 'upstream_unavailable'
  | 'upstream_error'
  | 'policy_denied'
  | 'confirmation_required'
  | 'guardrail_blocked'
  | 'audit_unavailable'
>;

/**
 * Why a gateway operation failed. Each face maps codes to its own error form in one place: JSON-RPC errors and isError
 * results (server/server.ts), REST (server/rest-routes.ts), code mode's `error.code` (code-tool.ts, the codes as they are).
 */
export class GatewayError extends ToolrouterError {
  override readonly name = 'GatewayError';
  declare readonly code: GatewayErrorCode;
  constructor(
    code: GatewayErrorCode,
    message: string,
    /** For upstream_unavailable: when to try again (REST Retry-After). */
    retryAfterSeconds?: number,
    /** Fields added to the error body (a denial's `policies`). */
    details?: Record<string, unknown>,
  ) {
    super(code, message, { ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }), ...(details === undefined ? {} : { details }) });
  }
}

/**
 * Code mode's virtual tool (`execute`) as the gateway lists it; implemented by src/mcp/gateway/code-tool.ts and set by the
 * assembly when code mode can be on for anyone.
 */
export interface CodeModeListing {
  readonly name: string;
  enabledFor(access: Access): boolean;
  tool(access: Access): Tool;
}

/** A search_tools match: the full definition as tools/list gives it, plus its scores. */
export type ScoredTool = Tool & { score: number; scores: { bm25?: number; vector?: number } };

export interface GatewayEvents {
  /** What some caller's tools/list returns may have changed (the callable tools, pinned tools or search activation). */
  listChanged: [];
  /** A server's resources, templates or prompts changed, or a resource it serves was updated. */
  featuresChanged: [server: string, change: FeaturesChange];
}

/**
 * The MCP gateway's behaviour, independent of transport: what tools/list shows, the virtual search_tools / call_tool,
 * and forwarding calls to the owning upstream after validating arguments. The MCP server (/mcp, stdio) and the
 * LiteLLM-style REST routes are thin faces over this. Only tools of upstream MCP servers are visible here: static
 * catalog sources have nobody to forward a call to.
 */
export class McpGateway extends EventEmitter<GatewayEvents> {
  /** Learning from usage: a search followed by a call of a found tool is recorded here (src/mcp/gateway/feedback-capture.ts). */
  feedback: FeedbackRecorder | undefined;
  /** Tool-definition tokens listed vs served, per caller (set by the assembly when there are metrics). */
  tokens: McpTokenAccounting | undefined;
  /** Code mode's `execute`, listed for callers it is on for (set by the assembly). */
  codeMode: CodeModeListing | undefined;
  /**
   * Policies, the secret guardrail and the audit trail over every call, resource read and prompt (set by the assembly
   * with `govern`; none: calls run as before, at no cost).
   */
  private governance: Governance | undefined;
  /** One policy target per catalog entry (entries are replaced, never changed), so policy answers are found by object. */
  private readonly targets = new WeakMap<CatalogEntry, PolicyTarget>();
  /**
   * Pairs searches with later calls across sessions and stateless requests (search ids, per-key history). In this
   * process's memory until the assembly hands in a shared store (`useSearchStore`).
   */
  searches: SearchLedger;
  /** Tasks clients asked for (2025-11-25 task-augmented calls, the 2026-07-28 extension, REST), per owner (relay/tasks.ts). */
  readonly tasks: GatewayTasks;
  /** The log levels sessions set (logging/setLevel), forwarded to upstreams as the most verbose of them (relay/levels.ts). */
  readonly logLevels: LogLevels;
  /** What upstreams ask during 2026-07-28 tasks, until tasks/update answers it (relay/task-inputs.ts). */
  readonly taskInputs: TaskInputs;
  private lastSignature: string;
  /**
   * The listing is compared on the next turn, once per burst of changes: comparing filters and serialises the catalog
   * (tens of ms at 100k tools), which in the catalog's own change event added to the step that swaps it.
   */
  private listCheck: NodeJS.Immediate | undefined;
  private readonly onCatalogChange = () => {
    this.listCheck ??= setImmediate(() => {
      this.listCheck = undefined;
      this.checkListChanged();
    });
  };
  private readonly onFeatures = (server: string, change: FeaturesChange) => this.emit('featuresChanged', server, change);
  private readonly activationPolicy: ActivationPolicy;
  private readonly coverageCache = new WeakMap<CatalogSnapshot, Map<string, string>>();

  constructor(
    private readonly catalog: Catalog,
    private readonly upstreams: UpstreamManager,
    private readonly searchService: SearchService,
    readonly settings: GatewaySettings,
    private readonly log: Logger,
    /** Bounds how long a first listing or search waits for upstreams still connecting; none: no waiting. */
    private readonly startupGate?: StartupGate,
    /** Where tasks' records live and how instances reach each other (Redis when scaled out); absent: this process. */
    tasksState: GatewayTasksState = {},
  ) {
    super();
    this.searches = new SearchLedger(() => this.feedback, new MemorySearchStore(), log);
    this.tasks = new GatewayTasks({ ...DEFAULT_TASKS_OPTIONS, ...settings.tasks }, tasksState);
    this.taskInputs = this.tasks.inputs;
    this.logLevels = new LogLevels((level) => upstreams.setLogLevel(level));
    this.activationPolicy = new ActivationPolicy(settings.search, settings.activation);
    // One listener per connected MCP session; their number is bounded by mcp.maxSessions, not by EventEmitter's 10.
    this.setMaxListeners(0);
    this.lastSignature = this.signature();
    // The catalog announces changes of searchable text; upstream status also covers definition-only changes.
    catalog.on('change', this.onCatalogChange);
    upstreams.on('status', this.onCatalogChange);
    upstreams.on('features', this.onFeatures);
  }

  /** Governs every call from now on (policy, guardrails, audit: src/mcp/gateway/governance.ts). */
  govern(options: GovernanceOptions): void {
    const governance = new Governance(options);
    // Nothing to do (no policies, no guardrail, no audit): calls take the path they always took.
    this.governance = governance.active ? governance : undefined;
  }

  /** The policy set changed: what each caller may list may have changed too (sessions compare their own listing). */
  policiesChanged(): void {
    this.coverageCache.delete(this.catalog.snapshot());
    this.emit('listChanged');
  }

  /** Whether policy could let this caller call this tool with some arguments (search and listings hide it otherwise). */
  private policyAllows(entry: CatalogEntry, access: Access): boolean {
    const policy = this.governance?.options.policy;
    return !policy?.active || policy.mayPermit(access, this.targetOf(entry));
  }

  /** The caller's key view plus what policy lets it see: callers with equal strings see the same tools. */
  viewKeyOf(access: Access): string {
    const policy = this.governance?.options.policy;
    return policy?.active ? `${access.viewKey}\u0000${policy.viewKey(access)}` : access.viewKey;
  }

  /**
   * What policy would decide for this caller calling `name` with `args` (POST /v1/policy/check): the decision, the
   * deciding policies, and the confirmation a @confirm policy would ask. Without policies every call is permitted.
   */
  checkPolicy(
    name: string,
    args: Record<string, unknown> | undefined,
    access: Access,
    surface: AuditSurface = 'mcp',
  ): { decision: 'permit' | 'deny'; policies: string[]; confirm?: { question: string; policy: string }; mode?: 'enforce' | 'log' } {
    const entry = this.catalog.get(name);
    if (!entry) throw new GatewayError('not_found', `unknown tool "${name}"`);
    const policy = this.governance?.options.policy;
    if (!policy?.active) return { decision: 'permit', policies: [] };
    const decided = policy.decide({ action: 'call_tool', access, target: this.targetOf(entry), arguments: args, surface });
    return {
      decision: decided.allowed ? 'permit' : 'deny',
      policies: decided.policies,
      ...(decided.confirm ? { confirm: decided.confirm } : {}),
      mode: decided.enforced ? 'enforce' : 'log',
    };
  }

  /** For faces searching the catalog themselves (REST search): what policy lets this caller see, and its view key. */
  policyView(access: Access): { visible: (entry: CatalogEntry) => boolean; key: string } | undefined {
    const policy = this.governance?.options.policy;
    if (!policy?.active) return undefined;
    return { visible: (entry) => policy.mayPermit(access, this.targetOf(entry)), key: policy.viewKey(access) };
  }

  private targetOf(entry: CatalogEntry): PolicyTarget {
    let target = this.targets.get(entry);
    if (!target) {
      target = this.makeTarget(entry);
      this.targets.set(entry, target);
    }
    return target;
  }

  private makeTarget(entry: CatalogEntry): PolicyTarget {
    const server = entry.server ?? entry.source;
    const prefix = this.settings.separator === '' ? '' : `${server}${this.settings.separator}`;
    const name = prefix !== '' && entry.tool.name.startsWith(prefix) ? entry.tool.name.slice(prefix.length) : entry.tool.name;
    return { id: entry.tool.name, name, server, ...(entry.tool.annotations ? { annotations: entry.tool.annotations } : {}) };
  }

  /** Keeps searches and their histories in `store` (Redis: shared by every instance) from now on. */
  useSearchStore(store: SearchStore): void {
    this.searches = new SearchLedger(() => this.feedback, store, this.log);
  }

  /**
   * Whether tools/list shows pinned + virtual tools (search) or every tool (aggregator) for this list of callable
   * tools. A function of the list, so a caller that sees only some tools gets the decision for what it sees.
   */
  searchActivation(entries: readonly CatalogEntry[] = this.callableEntries()): Activation {
    const listed = entries.filter((entry) => !this.isVirtual(entry.tool.name));
    // Token counts are remembered by the catalog hash of exactly these tools: counted once per change, not per request.
    return this.activationPolicy.decide(
      listed.map((entry) => entry.tool),
      () => catalogHash(listed),
    );
  }

  /** Whether this caller gets search (virtual tools, queries): never for a key without tool search. */
  private searchFor(access: Access, entries: readonly CatalogEntry[]): boolean {
    return access.searchEnabled && this.searchActivation(entries).active;
  }

  /**
   * The servers this caller may search, each with a one-line summary and its tool count (bounded: src/search/coverage.ts).
   * Kept per catalog snapshot and key, so listings do not count tokens again until the catalog changes.
   */
  coverage(access: Access = Access.open): string {
    const snapshot = this.catalog.snapshot();
    let byKey = this.coverageCache.get(snapshot);
    if (!byKey) {
      byKey = new Map();
      this.coverageCache.set(snapshot, byKey);
    }
    const key = access.restricted || this.governance?.options.policy?.active ? this.viewKeyOf(access) : '';
    let text = byKey.get(key);
    if (text === undefined) {
      const counts = new Map<string, number>();
      for (const entry of this.callableEntries(access)) counts.set(entry.source, (counts.get(entry.source) ?? 0) + 1);
      text = describeCoverage(
        [...counts].map(([source, tools]) => {
          const description = this.catalog.sourceDescription(source);
          return { name: source, tools, ...(description === undefined ? {} : { description }) };
        }),
      );
      if (byKey.size >= 64) byKey.delete(byKey.keys().next().value!);
      byKey.set(key, text);
    }
    return text;
  }

  /** search_tools and call_tool as tools/list shows them (only while search is active), search_tools naming what it covers. */
  virtualTools(access: Access = Access.open): Tool[] {
    if (this.settings.search === false) return [];
    const { searchToolName, callToolName } = this.settings;
    const covers = this.coverage(access);
    return [
      {
        name: searchToolName,
        title: 'Search tools',
        description:
          `Find tools for a task among all tools of the connected MCP servers (most are not listed directly). ` +
          `Describe what you want to do in plain words; returns the best matching tools with their full definitions ` +
          `(name, description, inputSchema). Then call one with ${callToolName}. ` +
          `"select:name1,name2" fetches tools by exact name; "regex:<pattern>" matches names and descriptions. ` +
          `Only tools that fit are returned: an empty answer means none of these servers has one.` +
          (covers === '' ? '' : `\n${covers}`),
        inputSchema: {
          type: 'object',
          properties: {
            query: { type: 'string', minLength: 1, maxLength: this.settings.maxQueryLength, description: 'What you want to do, e.g. "send an email with an attachment"' },
            top_k: {
              type: 'integer',
              minimum: 1,
              maximum: this.searchService.settings.maxTopK,
              description: `How many tools to return (default ${this.searchService.settings.topK})`,
            },
            detail: {
              type: 'string',
              enum: ['brief', 'full', 'code'],
              description:
                'brief: name, one-line description and required parameters (fetch the full definitions with "select:"); full: complete definitions; ' +
                `code: a TypeScript signature per tool, for code run with ${this.codeMode?.name ?? 'execute'} (the default when code mode is on)`,
            },
          },
          required: ['query'],
          additionalProperties: false,
        },
        outputSchema: {
          type: 'object',
          properties: {
            tools: {
              type: 'array',
              description: 'Matching tools, best first: full tool definitions plus score',
              items: { type: 'object', properties: { name: { type: 'string' }, score: { type: 'number' } }, required: ['name'] },
            },
            search_id: { type: 'string', description: `Pass to ${callToolName} with the tool you choose from this result` },
            matched: { type: 'integer', description: 'How many tools matched in all; ask with a larger top_k for more' },
          },
          required: ['tools'],
        },
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      {
        name: callToolName,
        title: 'Call a tool',
        description:
          `Call any tool of the connected MCP servers by its exact name, including tools found with ${searchToolName}. ` +
          `Arguments are checked against the tool's inputSchema first; the tool's own result is returned unchanged.`,
        inputSchema: {
          type: 'object',
          properties: {
            name: { type: 'string', minLength: 1, description: `Exact tool name as ${searchToolName} returned it` },
            arguments: { type: 'object', description: "The tool's arguments, matching its inputSchema", additionalProperties: true },
            search_id: { type: 'string', description: `The search_id of the ${searchToolName} result the tool was found in, when there was one` },
          },
          required: ['name'],
          additionalProperties: false,
        },
        annotations: { openWorldHint: true },
      },
    ];
  }

  /**
   * The virtual tool names. With 'auto' they are reserved and callable whether or not search is active right now:
   * a client that listed them just before a switch can still use them (they are listed only while active). With
   * search false they do not exist.
   */
  isVirtual(name: string, access: Access = Access.open): boolean {
    return this.settings.search !== false && access.searchEnabled && (name === this.settings.searchToolName || name === this.settings.callToolName);
  }

  /** Whether `name` is code mode's `execute` for this caller (reserved, like the other virtual tools, while it is on). */
  isCodeTool(name: string, access: Access = Access.open): boolean {
    return this.codeMode !== undefined && name === this.codeMode.name && this.codeMode.enabledFor(access);
  }

  /** A real tool the caller may call (it comes from a connected upstream server, and the caller's key allows it). */
  callable(name: string, access: Access = Access.open): CatalogEntry | undefined {
    const entry = this.catalog.get(name);
    return entry && this.upstreams.ownsSource(entry.source) && access.canSee(entry) && this.policyAllows(entry, access) ? entry : undefined;
  }

  /** A real tool the caller's key allows, whatever policy says (calls: the governed path decides and says why). */
  private reachable(name: string, access: Access): CatalogEntry | undefined {
    const entry = this.catalog.get(name);
    return entry && this.upstreams.ownsSource(entry.source) && access.canSee(entry) ? entry : undefined;
  }

  /**
   * Resolves once every upstream has finished its first connection attempt and the index covers what they listed, or
   * when the start-up wait is over, whichever comes first; at once ever after.
   */
  async startup(): Promise<void> {
    await this.startupGate?.wait();
  }

  /** The upstreams this caller may use that are not connected now: what an answer given now is missing. */
  upstreamNotes(access: Access = Access.open): UpstreamNotes | undefined {
    return this.startupGate?.notes((server) => access.canSeeServer(server));
  }

  /** Every tool the caller may call, in catalog order. */
  callableEntries(access: Access = Access.open): CatalogEntry[] {
    return this.catalog.snapshot().entries.filter((entry) => this.upstreams.ownsSource(entry.source) && access.canSee(entry) && this.policyAllows(entry, access));
  }

  /** A hash of what tools/list shows this caller; sessions compare it to tell their client only of real changes. */
  listSignature(access: Access = Access.open): string {
    return createHash('sha256').update(JSON.stringify(this.unfilteredList(access))).digest('hex');
  }

  /**
   * tools/list. Without a query: pinned tools + the virtual tools (or, in aggregator mode, every callable tool). With a
   * query (SEP-1821): the callable tools matching it, best first, at most `queryLimit`. Paginated by `pageSize`; the
   * cursor is an opaque offset bound to the query it was issued for.
   */
  async listTools(params: { cursor?: string; query?: string } = {}, access: Access = Access.open): Promise<{ tools: Tool[]; nextCursor?: string }> {
    const asked = params.query?.trim() ? params.query.trim() : undefined;
    // A query's cursor carries the query: a client that pages with the cursor alone (as generic clients do, not knowing
    // SEP-1821) continues the same query; one that sends both must send the same query.
    const query = asked ?? (params.cursor === undefined ? undefined : queryOfCursor(params.cursor));
    const offset = params.cursor === undefined ? 0 : decodeCursor(params.cursor, query);
    let tools: Tool[];
    if (query !== undefined) {
      if (query.length > this.settings.maxQueryLength) {
        throw new GatewayError('invalid_arguments', `query must be at most ${this.settings.maxQueryLength} characters`);
      }
      if (!access.searchEnabled) throw new GatewayError('forbidden', 'tool search is disabled for this key; tools/list without a query lists its tools');
      // A listing, best first, filled to queryLimit: abstaining (min_score) is search_tools' answer, not tools/list's.
      tools = (await this.searchCounted(query, this.settings.queryLimit, access, { minScore: 0, surface: 'mcp_list' })).tools.map(({ score: _score, scores: _scores, ...tool }) => tool);
    } else {
      tools = this.unfilteredList(access);
    }
    const page = tools.slice(offset, offset + this.settings.pageSize);
    this.tokens?.listed(access, page, query === undefined && offset === 0 ? this.catalog.snapshot() : undefined, () => this.callableEntries(access));
    const next = offset + page.length;
    return next < tools.length ? { tools: page, nextCursor: encodeCursor(next, query) } : { tools: page };
  }

  /** search_tools: the best matching callable tools with scores, pinned tools excluded (they are listed already). */
  async search(query: string, topK?: number, access: Access = Access.open): Promise<ScoredTool[]> {
    return (await this.searchCounted(query, topK, access)).tools;
  }

  /**
   * `search`, and how many tools matched in all (`matched`; undefined for select and regex queries). `surface` names the
   * face for the search log (search_tools: `mcp`, SEP-1821 listings: `mcp_list`, code mode: `code`).
   */
  async searchCounted(
    query: string,
    topK?: number,
    access: Access = Access.open,
    { minScore, surface = 'mcp' }: { minScore?: number; surface?: string } = {},
  ): Promise<{ tools: ScoredTool[]; matched?: number }> {
    if (this.upstreams.status().length === 0) throw new GatewayError('index_not_ready', NO_SERVERS);
    try {
      // "select:" and "regex:" prefixes are the search service's, so every face reads a query the same way.
      const response = await this.searchService.search({
        query,
        topK,
        ...(minScore === undefined ? {} : { minScore }),
        visible: (entry) => this.upstreams.ownsSource(entry.source) && access.canSee(entry) && this.policyAllows(entry, access),
        feedbackScope: access.scope,
        observe: { surface, ...(access.scope === undefined ? {} : { key: access.scope }) },
      });
      const tools = response.results.map((hit) => ({ ...hit.tool, score: hit.score, scores: hit.scores }));
      return response.matched === undefined ? { tools } : { tools, matched: response.matched };
    } catch (error) {
      if (error instanceof IndexNotReadyError) throw new GatewayError('index_not_ready', INDEX_BUILDING);
      throw error;
    }
  }

  /**
   * Calls a real tool: validates the arguments against its inputSchema, forwards to the owning upstream under the
   * upstream's own name, and returns the upstream's result unchanged (including results with `isError: true`).
   */
  async callTool(
    name: string,
    args: Record<string, unknown> | undefined,
    options: {
      signal?: AbortSignal;
      access?: Access;
      onProgress?: (progress: UpstreamProgress) => void;
      /** The caller's client channel: the upstream's elicitation, sampling and logs during the call reach it. */
      relay?: RelayContext;
      /** The caller runs this call as a task: an upstream that can run the tool as a task does so (calls.ts runsAsTask). */
      asTask?: boolean;
      /** The face the call came through, for policies (context.surface) and the audit trail; default mcp. */
      surface?: AuditSurface;
    } = {},
  ): Promise<CallToolResult> {
    const access = options.access ?? Access.open;
    if (this.isVirtual(name, access) || this.isCodeTool(name, access)) {
      throw new GatewayError('recursion', `"${name}" is one of toolrouter's own tools; call it directly, not through ${this.settings.callToolName}`);
    }
    // Found by the key's view alone: policy decides below (and names its policies) rather than hiding the tool here.
    const entry = this.reachable(name, access);
    const down = entry ? undefined : this.upstreams.unavailableServer(name, this.settings.separator);
    if (down !== undefined && access.canSee({ source: down, server: down, tool: { name } as Tool })) {
      const error = this.upstreams.unavailableError(down);
      throw new GatewayError('upstream_unavailable', access.isAdmin ? error.message : briefUnavailable(down), error.retryAfterSeconds);
    }
    // A restricted key gets the same answer for a tool it may not use and for one that does not exist, so it cannot
    // probe for names outside its servers.
    if (!entry && access.restricted) throw new GatewayError('forbidden', `tool "${name}" is not available to this key (${access.describe()})`);
    if (!entry) {
      const hint = this.settings.search ? `; use ${this.settings.searchToolName} to find tools` : '';
      throw new GatewayError('unknown_tool', `unknown tool "${name}"${hint}`);
    }
    const problems = this.validator(entry.tool)?.(args ?? {}) ?? [];
    if (problems.length > 0) {
      throw new GatewayError('invalid_arguments', `invalid arguments for "${name}": ${problems.join('; ')}`);
    }
    const forward = (args: Record<string, unknown> | undefined) =>
      this.forwarding(
      () =>
        mcpClientToolSpan({ name, server: entry.server ?? entry.source, arguments: args }, (meta) =>
          this.upstreams.callTool(name, args, {
            timeoutMs: this.settings.callTimeoutMs,
            signal: options.signal,
            onProgress: options.onProgress,
            meta,
            subject: access.subject,
            ...(access.key ? { keyId: access.key.keyId } : {}),
            ...(options.relay ? { relay: options.relay } : {}),
            ...(options.asTask ? { asTask: true } : {}),
          }),
        ),
      access,
    );
    if (!this.governance) return forward(args);
    return this.governed<CallToolResult>({
      action: 'call_tool',
      access,
      target: this.targetOf(entry),
      arguments: args,
      surface: options.surface ?? 'mcp',
      ...(options.relay ? { relay: options.relay } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      run: forward,
    });
  }

  /** The governed path (governance.ts), its refusals as GatewayErrors every face already maps. */
  private async governed<T>(call: Parameters<Governance['run']>[0]): Promise<T> {
    try {
      return await this.governance!.run<T>(call);
    } catch (error) {
      if (error instanceof GovernanceError) throw new GatewayError(error.code, error.message, undefined, { ...error.details });
      throw error;
    }
  }

  /**
   * Whether a tools/call (directly, or through call_tool) is of a tool its server runs only as a task: on 2026-07-28 a
   * client that declared the tasks extension is then answered with a task (src/mcp/relay/task-inputs.ts).
   */
  isLongJob(name: string, args: Record<string, unknown> | undefined): boolean {
    const target = name === this.settings.callToolName ? args?.name : name;
    return typeof target === 'string' && this.upstreams.requiresTask(target);
  }

  /** Resources, templates and prompts of the servers the caller may use (namespaced names). */
  offered(access: Access = Access.open): ReturnType<UpstreamManager['offered']> {
    return this.upstreams.offered((server) => access.canSeeServer(server));
  }

  /** resources/list: the resources of the servers the caller may use, names namespaced, paginated like tools. */
  listResources(params: { cursor?: string } = {}, access: Access = Access.open): { resources: Resource[]; nextCursor?: string } {
    const { items, nextCursor } = this.page(this.offered(access).resources, params.cursor);
    return { resources: items, ...(nextCursor ? { nextCursor } : {}) };
  }

  listResourceTemplates(params: { cursor?: string } = {}, access: Access = Access.open): { resourceTemplates: ResourceTemplate[]; nextCursor?: string } {
    const { items, nextCursor } = this.page(this.offered(access).templates, params.cursor);
    return { resourceTemplates: items, ...(nextCursor ? { nextCursor } : {}) };
  }

  listPrompts(params: { cursor?: string } = {}, access: Access = Access.open): { prompts: Prompt[]; nextCursor?: string } {
    const { items, nextCursor } = this.page(this.offered(access).prompts, params.cursor);
    return { prompts: items, ...(nextCursor ? { nextCursor } : {}) };
  }

  /** resources/read, forwarded to the server that listed the URI (or whose template matches it), result unchanged. */
  async readResource(uri: string, options: { signal?: AbortSignal; access?: Access; surface?: AuditSurface; relay?: RelayContext } = {}): Promise<ReadResourceResult> {
    const access = options.access ?? Access.open;
    const connection = this.resourceOwner(uri, access);
    const read = () =>
      this.forwarding(() =>
        connection.forward({ method: 'resources/read', params: { uri } }, ReadResourceResultSchema, { timeoutMs: this.settings.callTimeoutMs, signal: options.signal }),
      );
    if (!this.governance) return read();
    return this.governed<ReadResourceResult>({
      action: 'read_resource',
      access,
      target: { id: uri, name: uri, server: connection.name },
      arguments: undefined,
      surface: options.surface ?? 'mcp',
      ...(options.relay ? { relay: options.relay } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      run: read,
    });
  }

  /** prompts/get by namespaced name, forwarded under the server's own prompt name. */
  async getPrompt(
    name: string,
    args: Record<string, string> | undefined,
    options: { signal?: AbortSignal; access?: Access; surface?: AuditSurface; relay?: RelayContext } = {},
  ): Promise<GetPromptResult> {
    const access = options.access ?? Access.open;
    const owner = this.upstreams.promptOwner(name, (server) => access.canSeeServer(server));
    if (!owner) throw new GatewayError('not_found', `unknown prompt "${name}"; prompts/list lists the prompts available`);
    const get = (sent: Record<string, unknown> | undefined) =>
      this.forwarding(() =>
        owner.connection.forward(
          { method: 'prompts/get', params: { name: owner.name, ...(sent === undefined ? {} : { arguments: sent }) } },
          GetPromptResultSchema,
          { timeoutMs: this.settings.callTimeoutMs, signal: options.signal },
        ),
      );
    if (!this.governance) return get(args);
    return this.governed<GetPromptResult>({
      action: 'get_prompt',
      access,
      target: { id: name, name: owner.name, server: owner.connection.name },
      arguments: args,
      surface: options.surface ?? 'mcp',
      ...(options.relay ? { relay: options.relay } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      run: get,
    });
  }

  /**
   * completion/complete for an aggregated prompt (by namespaced name, sent on under the server's own name) or resource
   * template (by URI template, unchanged), routed to the server that offers it; the answer comes back as it is.
   */
  async complete(
    params: { ref: { type: string; name?: string; uri?: string }; argument: { name: string; value: string }; context?: Record<string, unknown> },
    options: { signal?: AbortSignal; access?: Access } = {},
  ): Promise<CompleteResult> {
    const access = options.access ?? Access.open;
    const visible = (server: string) => access.canSeeServer(server);
    let connection: UpstreamConnection | undefined;
    let ref = params.ref;
    if (ref.type === 'ref/prompt' && typeof ref.name === 'string') {
      const owner = this.upstreams.promptOwner(ref.name, visible);
      connection = owner?.connection;
      if (owner) ref = { ...ref, name: owner.name };
    } else if (ref.type === 'ref/resource' && typeof ref.uri === 'string') {
      connection = this.upstreams.templateOwner(ref.uri, visible);
    }
    if (!connection) throw new GatewayError('not_found', `nothing to complete for ${JSON.stringify(params.ref)}; prompts/list and resources/templates/list show what can be completed`);
    const target = connection;
    return this.forwarding(() =>
      target.forward({ method: 'completion/complete', params: { ...params, ref } }, CompleteResultSchema, { timeoutMs: this.settings.callTimeoutMs, signal: options.signal }),
    );
  }

  /**
   * resources/subscribe: subscribes at the owning server (once for all sessions). Returns the owning server's name, for
   * the session to match notifications/resources/updated against.
   */
  async subscribe(uri: string, access: Access = Access.open): Promise<string> {
    const connection = this.resourceOwner(uri, access);
    if (!connection.offered().subscribe) throw new GatewayError('invalid_arguments', `the server of "${uri}" does not support resource subscriptions`);
    await this.forwarding(() => connection.subscribe(uri, { timeoutMs: this.settings.callTimeoutMs }));
    return connection.name;
  }

  async unsubscribe(uri: string, server: string): Promise<void> {
    const connection = this.upstreams.resourceOwner(uri, (name) => name === server);
    await connection?.unsubscribe(uri, { timeoutMs: this.settings.callTimeoutMs });
  }

  private resourceOwner(uri: string, access: Access): UpstreamConnection {
    const connection = this.upstreams.resourceOwner(uri, (server) => access.canSeeServer(server));
    if (!connection) throw new GatewayError('not_found', `unknown resource "${uri}"; resources/list and resources/templates/list show what can be read`);
    return connection;
  }

  /** `access`: who is told; only the admin reads why a server is unavailable (its errors may carry upstream bodies). */
  private async forwarding<T>(work: () => Promise<T>, access: Access = Access.open): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof UpstreamError) {
        const message = error.code === 'upstream_unavailable' && !access.isAdmin && error.server !== undefined ? briefUnavailable(error.server) : error.message;
        throw new GatewayError(error.code, message, error.retryAfterSeconds);
      }
      throw error;
    }
  }

  private page<T>(items: T[], cursor: string | undefined): { items: T[]; nextCursor?: string } {
    const offset = cursor === undefined ? 0 : decodeCursor(cursor, undefined);
    const page = items.slice(offset, offset + this.settings.pageSize);
    const next = offset + page.length;
    return next < items.length ? { items: page, nextCursor: encodeCursor(next, undefined) } : { items: page };
  }

  close(): void {
    this.tasks.close();
    clearImmediate(this.listCheck);
    this.catalog.off('change', this.onCatalogChange);
    this.upstreams.off('status', this.onCatalogChange);
    this.upstreams.off('features', this.onFeatures);
    this.removeAllListeners();
  }

  private unfilteredList(access: Access = Access.open): Tool[] {
    const entries = this.callableEntries(access);
    // Code mode's tool is listed in both forms: code over a short aggregated list saves round trips too.
    const code = this.codeMode?.enabledFor(access) ? [this.codeMode.tool(access)] : [];
    if (!this.searchFor(access, entries)) return [...this.aggregatorTools(entries, access), ...code];
    const pinned = this.searchService.settings.pinned
      .map((name) => this.callable(name, access)?.tool)
      .filter((tool): tool is Tool => tool !== undefined && !this.isVirtual(tool.name) && !this.isCodeTool(tool.name, access));
    return [...pinned, ...this.virtualTools(access), ...code];
  }

  /** The aggregator's listing: every callable tool, minus any that a reserved virtual name shadows. */
  private aggregatorTools(entries: readonly CatalogEntry[], access: Access = Access.open): Tool[] {
    return entries.map((entry) => entry.tool).filter((tool) => !this.isVirtual(tool.name, access) && !this.isCodeTool(tool.name, access));
  }

  private validator(tool: Tool): SchemaValidator | undefined {
    try {
      return compileSchema(tool.inputSchema);
    } catch (error) {
      // The catalog only admits valid schemas, but one can still fail to compile (say, an unresolvable $ref): let the
      // upstream judge the arguments rather than make the tool uncallable.
      this.log.warn({ tool: tool.name, err: error }, 'cannot compile inputSchema; forwarding arguments unchecked');
      return undefined;
    }
  }

  /**
   * Covers every callable tool, not only the unfiltered list: a key's own list (a subset in aggregator form) can change
   * while the full list (pinned + virtual tools) does not. Sessions then check their own list (listSignature).
   */
  private signature(): string {
    return createHash('sha256').update(JSON.stringify([this.unfilteredList(), this.callableEntries().map((entry) => entry.tool)])).digest('hex');
  }

  private checkListChanged(): void {
    const signature = this.signature();
    if (signature === this.lastSignature) return;
    this.lastSignature = signature;
    this.emit('listChanged');
  }
}

/** What a caller other than the admin learns of a server that is down: that it is, not the upstream's words. */
function briefUnavailable(server: string): string {
  return `upstream MCP server "${server}" is unavailable right now; retry later`;
}

function encodeCursor(offset: number, query: string | undefined): string {
  return Buffer.from(JSON.stringify(query === undefined ? { o: offset, q: queryKey(query) } : { o: offset, q: queryKey(query), t: query })).toString('base64url');
}

/** The query a cursor was issued for, when it carries one (bounded: queries are at most maxQueryLength). */
function queryOfCursor(cursor: string): string | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { t?: unknown };
    return typeof parsed.t === 'string' && parsed.t.trim() !== '' ? parsed.t : undefined;
  } catch {
    return undefined;
  }
}

function decodeCursor(cursor: string, query: string | undefined): number {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { o?: unknown; q?: unknown };
    if (typeof parsed.o === 'number' && Number.isInteger(parsed.o) && parsed.o >= 0 && parsed.q === queryKey(query)) return parsed.o;
  } catch {
    // Falls through to the error below.
  }
  throw new GatewayError('invalid_cursor', 'invalid cursor (cursors are only valid for the query they were issued with)');
}

function queryKey(query: string | undefined): string {
  return query === undefined ? '' : createHash('sha256').update(query).digest('base64url').slice(0, 16);
}
