/**
 * What an MCP search leaves behind for the call that may follow it (src/mcp/gateway/feedback-capture.ts): the search
 * under its id, and the recent-search histories a call without an id is paired through (a caller scope's, for the
 * stateless 2026-07-28 revision; a 2025 session's own). Two implementations: this process's memory (no Redis, as the
 * gateway always kept them) and Redis (src/state/redis/searches.ts), where a search made on one API instance is
 * credited by a call on any other.
 */

/** A prose search that returned tools, as the ledger files it. */
export interface SearchRecord {
  /** Returned to the client as `search_id`: random, and not a credential (calls are checked against `scope` too). */
  id: string;
  query: string;
  /** What it returned, by name. */
  tools: readonly string[];
  /** The caller scope (API key id) that searched; '' on an open service. */
  scope: string;
}

/** Which history a search is filed in, or a call paired through. */
export type SearchHistory = { scope: string } | { session: string };

/**
 * What claiming a tool for a search came to: `credited` (this caller is the one to record it), `spent` (the search
 * exists but does not count this call: it did not return the tool, or already counted it), `unknown` (no such search
 * for this caller: expired, never made, another scope's).
 */
export type Claim = { kind: 'credited'; search: SearchRecord } | { kind: 'spent' } | { kind: 'unknown' };

/**
 * The search store. Its contract, which both implementations keep (test/unit/state/searches.redis.test.ts):
 * - `add` files a search under its id for `SEARCH_ID_TTL_MS`, and at the head of each history named (the newest
 *   RECENT_SEARCHES of a history are kept).
 * - `claim` pairs a call of `tool` with a search: by id (the search it names, if it is still valid and the caller's), or
 *   by history (the newest search there that returned the tool). A search counts a tool once: of any number of claims
 *   for the same search and tool, on any number of instances at once, exactly one is `credited`.
 */
export interface SearchStore {
  add(search: SearchRecord, histories: readonly SearchHistory[]): Promise<void>;
  claim(tool: string, scope: string, from: { id: string } | SearchHistory): Promise<Claim>;
}

/** How long a search id stays valid: long enough for a model's next step, short enough to bound what is held. */
export const SEARCH_ID_TTL_MS = 10 * 60_000;
/** Searches one history remembers; an agent calls what it found soon or never. */
export const RECENT_SEARCHES = 16;
/** Most search ids held in memory at once (oldest dropped first). */
const MAX_SEARCH_IDS = 10_000;
/** Most caller scopes whose recent searches are held in memory at once; least recently searched first out. */
const MAX_SCOPES = 1_000;
/** Most sessions whose own searches are held in memory at once (a closed session's go when others push them out). */
const MAX_SESSIONS = 10_000;

interface Held {
  search: SearchRecord;
  tools: Set<string>;
  /** Tools already credited to this search. */
  recorded: Set<string>;
  expires: number;
}

/**
 * This process's memory: what the gateway always kept. A scope's history holds only unexpired searches; a session's
 * own history keeps its searches while the session searches (as a session object holding them did).
 */
export class MemorySearchStore implements SearchStore {
  private readonly byId = new Map<string, Held>();
  private readonly byScope = new Map<string, Held[]>();
  private readonly bySession = new Map<string, Held[]>();

  constructor(private readonly now: () => number = Date.now) {}

  async add(search: SearchRecord, histories: readonly SearchHistory[]): Promise<void> {
    const held: Held = { search, tools: new Set(search.tools), recorded: new Set(), expires: this.now() + SEARCH_ID_TTL_MS };
    this.byId.set(search.id, held);
    if (this.byId.size > MAX_SEARCH_IDS) this.byId.delete(this.byId.keys().next().value!);
    for (const history of histories) {
      const [map, key, max] = 'scope' in history ? [this.byScope, history.scope, MAX_SCOPES] : [this.bySession, history.session, MAX_SESSIONS];
      const recent = map.get(key) ?? [];
      map.delete(key);
      map.set(key, [...recent, held].slice(-RECENT_SEARCHES));
      if (map.size > max) map.delete(map.keys().next().value!);
    }
  }

  async claim(tool: string, scope: string, from: { id: string } | SearchHistory): Promise<Claim> {
    const now = this.now();
    if ('id' in from) {
      const held = this.byId.get(from.id);
      if (held && held.expires <= now) this.byId.delete(from.id);
      if (!held || held.expires <= now || held.search.scope !== scope) return { kind: 'unknown' };
      return take(held, tool);
    }
    const searches = 'scope' in from ? (this.byScope.get(from.scope) ?? []).filter((held) => held.expires > now) : (this.bySession.get(from.session) ?? []);
    for (let i = searches.length - 1; i >= 0; i--) {
      const held = searches[i]!;
      if (held.tools.has(tool)) return take(held, tool);
    }
    return { kind: 'spent' };
  }
}

function take(held: Held, tool: string): Claim {
  if (!held.tools.has(tool) || held.recorded.has(tool)) return { kind: 'spent' };
  held.recorded.add(tool);
  return { kind: 'credited', search: held.search };
}
