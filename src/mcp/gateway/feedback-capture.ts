import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { recordUse } from '../../feedback/capture.js';
import type { FeedbackRecorder } from '../../feedback/service.js';

/** Queries in these forms name tools or patterns; a call after them says nothing about what words mean. */
const NOT_PROSE = /^\s*(select|regex):/i;

/** Searches one caller (a session, or a key on the stateless revision) remembers; an agent calls what it found soon or never. */
const RECENT_SEARCHES = 16;
/** How long a search id stays valid: long enough for a model's next step, short enough to bound what is held. */
export const SEARCH_ID_TTL_MS = 10 * 60_000;
/** Most search ids held at once (oldest dropped first). */
const MAX_SEARCH_IDS = 10_000;
/** Most callers (keys) whose recent searches are held at once. */
const MAX_SCOPES = 1_000;

/** `_meta` key a direct tools/call may carry to name the search it follows (call_tool takes `search_id` as an argument). */
export const SEARCH_ID_META = 'toolrouter/search_id';

interface Search {
  query: string;
  tools: Set<string>;
  /** Tools already credited to this search: each search counts a tool once. */
  recorded: Set<string>;
  scope: string;
  expires: number;
}

/**
 * Search → call pairing for the whole gateway, across sessions and stateless requests. Each prose search gets a
 * short-lived id (returned in search_tools results as `search_id`); a later call carrying it is credited to exactly that
 * search. A call without one is credited to the caller's most recent search that returned the tool: the session's own
 * searches on the 2025 revision, the key's recent searches on the stateless 2026-07-28 revision (where nothing else
 * ties two requests together; on an open service without keys every caller shares one history, which is why the id is
 * the reliable form).
 */
export class SearchLedger {
  private readonly byId = new Map<string, Search>();
  private readonly recentByScope = new Map<string, Search[]>();

  constructor(
    private readonly recorder: () => FeedbackRecorder | undefined,
    private readonly log?: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Remembers a search; returns its id, or undefined when nothing will be learnt from it (no recorder, not prose, no hits). */
  searched(query: string, tools: readonly { name: string }[], scope: string | undefined): { id: string; search: Search } | undefined {
    if (!this.recorder() || NOT_PROSE.test(query) || tools.length === 0) return undefined;
    const search: Search = { query, tools: new Set(tools.map((tool) => tool.name)), recorded: new Set(), scope: scope ?? '', expires: this.now() + SEARCH_ID_TTL_MS };
    const id = randomUUID();
    this.byId.set(id, search);
    if (this.byId.size > MAX_SEARCH_IDS) this.byId.delete(this.byId.keys().next().value!);
    const recent = this.recentByScope.get(search.scope) ?? [];
    this.recentByScope.delete(search.scope);
    this.recentByScope.set(search.scope, [...recent, search].slice(-RECENT_SEARCHES));
    if (this.recentByScope.size > MAX_SCOPES) this.recentByScope.delete(this.recentByScope.keys().next().value!);
    return { id, search };
  }

  /** The search an id names, if it is still valid and was made by the same caller (an id is not a credential). */
  byIdFor(id: string, scope: string | undefined): Search | undefined {
    const search = this.byId.get(id);
    if (!search) return undefined;
    if (search.expires <= this.now()) {
      this.byId.delete(id);
      return undefined;
    }
    return search.scope === (scope ?? '') ? search : undefined;
  }

  /** The caller's recent searches, newest last (stateless callers: per key). */
  recent(scope: string | undefined): Search[] {
    const now = this.now();
    return (this.recentByScope.get(scope ?? '') ?? []).filter((search) => search.expires > now);
  }

  /** Credits `tool` to the newest of `searches` that returned it (once per search and tool). */
  credit(tool: string, searches: readonly Search[], scope: string | undefined): void {
    const recorder = this.recorder();
    if (!recorder) return;
    for (let i = searches.length - 1; i >= 0; i--) {
      const search = searches[i]!;
      if (!search.tools.has(tool)) continue;
      if (search.recorded.has(tool)) return;
      search.recorded.add(tool);
      recordUse(recorder, this.log, { query: search.query, tool, scope, surface: 'mcp' });
      return;
    }
  }
}

/**
 * One MCP server instance's view of the ledger: a 2025 session (or stdio connection), which remembers its own
 * searches, or one stateless 2026-07-28 request, which has only the ledger's per-key history and the search id.
 */
export class McpFeedback {
  private readonly own: Search[] = [];

  constructor(
    private readonly ledger: SearchLedger | undefined,
    /** The caller scope (an API key id), read when a search or call happens. */
    private readonly scope: () => string | undefined = () => undefined,
    /** true: a session with its own history; false: a stateless request (falls back to the key's recent searches). */
    private readonly session = true,
  ) {}

  /** A `search_tools` or SEP-1821 `tools/list` query result; returns the search id to hand back to the client. */
  searched(query: string, tools: readonly { name: string }[]): string | undefined {
    const made = this.ledger?.searched(query.trim(), tools, this.scope());
    if (!made) return undefined;
    if (this.session) {
      this.own.push(made.search);
      if (this.own.length > RECENT_SEARCHES) this.own.shift();
    }
    return made.id;
  }

  /** A SEP-1821 `tools/list` with a query, passed through. */
  listed<T extends { tools: readonly { name: string }[] }>(query: unknown, result: T): T {
    if (typeof query === 'string' && query.trim() !== '') this.searched(query, result.tools);
    return result;
  }

  /**
   * A call of `tool` (anything but a name, from bad arguments, is ignored). With a valid search id the call is credited
   * to that search; otherwise to the most recent search of this session (or, stateless, of this key) that returned it.
   */
  called(tool: unknown, searchId?: unknown): void {
    if (!this.ledger || typeof tool !== 'string') return;
    const scope = this.scope();
    const named = typeof searchId === 'string' ? this.ledger.byIdFor(searchId, scope) : undefined;
    if (named) return this.ledger.credit(tool, [named], scope);
    this.ledger.credit(tool, this.session ? this.own : this.ledger.recent(scope), scope);
  }
}
