import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { recordUse } from '../../feedback/capture.js';
import type { FeedbackRecorder } from '../../feedback/service.js';
import type { SearchHistory, SearchRecord, SearchStore } from '../../state/searches.js';

/** Queries in these forms name tools or patterns; a call after them says nothing about what words mean. */
const NOT_PROSE = /^\s*(select|regex):/i;

/** How long a search id stays valid (src/state/searches.ts). */
export { SEARCH_ID_TTL_MS } from '../../state/searches.js';

/** `_meta` key a direct tools/call may carry to name the search it follows (call_tool takes `search_id` as an argument). */
export const SEARCH_ID_META = 'toolrouter/search_id';

/**
 * Search → call pairing for the whole gateway, across sessions and stateless requests. Each prose search gets a
 * short-lived id (returned in search_tools results as `search_id`); a later call carrying it is credited to exactly that
 * search. A call without one is credited to the caller's most recent search that returned the tool: the session's own
 * searches on the 2025 revision, the key's recent searches on the stateless 2026-07-28 revision (where nothing else
 * ties two requests together; on an open service without keys every caller shares one history, which is why the id is
 * the reliable form). Searches and histories live in a SearchStore (src/state/searches.ts): with Redis, a search made
 * on one instance is credited by a call on any other, once.
 */
export class SearchLedger {
  constructor(
    private readonly recorder: () => FeedbackRecorder | undefined,
    private readonly store: SearchStore,
    private readonly log?: Logger,
  ) {}

  /**
   * Remembers a search; returns its id, or undefined when nothing will be learnt from it (no recorder, not prose, no
   * hits) or it could not be stored (the search is answered without an id).
   */
  async searched(query: string, tools: readonly { name: string }[], scope: string | undefined, session?: string): Promise<string | undefined> {
    const recorder = this.recorder();
    if (!recorder || NOT_PROSE.test(query) || tools.length === 0) return undefined;
    // Under analytics.queries hash | off only the query's hash is kept (src/analytics/credit.ts).
    const search: SearchRecord = { id: randomUUID(), query: recorder.storedQuery?.(query) ?? query, tools: [...new Set(tools.map((tool) => tool.name))], scope: scope ?? '' };
    const histories: SearchHistory[] = [{ scope: search.scope }, ...(session === undefined ? [] : [{ session }])];
    try {
      await this.store.add(search, histories);
      return search.id;
    } catch (error) {
      this.log?.warn({ err: error }, 'search not stored for feedback; answered without a search id');
      return undefined;
    }
  }

  /**
   * A call of `tool`: with a valid search id, paired with exactly that search; otherwise with the newest search of the
   * session's own history (a 2025 session), or of the scope's (stateless), that returned it.
   */
  async called(tool: string, scope: string | undefined, options: { searchId?: string; session?: string }): Promise<void> {
    if (!this.recorder()) return;
    const own = scope ?? '';
    try {
      const named = options.searchId === undefined ? undefined : await this.store.claim(tool, own, { id: options.searchId });
      const claim =
        named !== undefined && named.kind !== 'unknown'
          ? named
          : await this.store.claim(tool, own, options.session === undefined ? { scope: own } : { session: options.session });
      if (claim.kind === 'credited') this.credited(claim.search, tool, scope);
    } catch (error) {
      this.log?.warn({ err: error, tool }, 'search state unavailable; this call was not credited');
    }
  }

  /**
   * The one place a search gets the tool called from its results: every pairing above ends here, once per search and
   * tool across all instances. Whatever else learns from that (usage feedback today) hooks in here.
   */
  private credited(search: SearchRecord, tool: string, scope: string | undefined): void {
    const recorder = this.recorder();
    if (recorder) recordUse(recorder, this.log, { query: search.query, tool, scope, surface: 'mcp' });
  }
}

/**
 * One MCP server instance's view of the ledger: a 2025 session (or stdio connection), which remembers its own
 * searches under its session id (so whichever instance serves its next request finds them), or one stateless
 * 2026-07-28 request, which has only the ledger's per-key history and the search id.
 */
export class McpFeedback {
  constructor(
    private readonly ledger: SearchLedger | undefined,
    /** The caller scope (an API key id), read when a search or call happens. */
    private readonly scope: () => string | undefined = () => undefined,
    /** A session's id (read when a search or call happens); undefined: a stateless request (the key's history). */
    private readonly session?: () => string | undefined,
  ) {}

  /** A `search_tools` or SEP-1821 `tools/list` query result; returns the search id to hand back to the client. */
  async searched(query: string, tools: readonly { name: string }[]): Promise<string | undefined> {
    return this.ledger?.searched(query.trim(), tools, this.scope(), this.session?.());
  }

  /** A SEP-1821 `tools/list` with a query, passed through. */
  async listed<T extends { tools: readonly { name: string }[] }>(query: unknown, result: T): Promise<T> {
    if (typeof query === 'string' && query.trim() !== '') await this.searched(query, result.tools);
    return result;
  }

  /**
   * A call of `tool` (anything but a name, from bad arguments, is ignored). With a valid search id the call is credited
   * to that search; otherwise to the most recent search of this session (or, stateless, of this key) that returned it.
   * Never fails and never holds up the call it is told of.
   */
  called(tool: unknown, searchId?: unknown): void {
    if (!this.ledger || typeof tool !== 'string') return;
    const session = this.session?.();
    void this.ledger.called(tool, this.scope(), { ...(typeof searchId === 'string' ? { searchId } : {}), ...(session === undefined ? {} : { session }) });
  }
}
