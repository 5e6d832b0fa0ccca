import { createHash } from 'node:crypto';
import { withRedis, type RedisClient, type RedisGate, type RedisKeys } from '../../redis/connection.js';
import { RECENT_SEARCHES, SEARCH_ID_TTL_MS, type Claim, type SearchHistory, type SearchRecord, type SearchStore } from '../searches.js';

export interface RedisSearchStoreOptions {
  redis: RedisClient;
  keys: RedisKeys;
  /**
   * How long a search (and a history after its newest search) lives.
   * @defaultValue SEARCH_ID_TTL_MS (10 minutes)
   */
  ttlMs?: number;
  /** Commands go through it when given: a Redis outage costs a search its id, or a call its credit, never the request. */
  gate?: RedisGate;
}

/**
 * Pairs a call with the first of the given searches (newest first) that returned the tool, and marks the tool credited
 * there, in one atomic step. A search is a hash: `q` query, `s` scope, `T` its tools as JSON, `t:<tool>` per tool
 * returned, `r:<tool>` once credited. The race it closes: two instances handling calls of the same tool after the same
 * search at once (a client retrying on another instance, parallel calls) would each read "not yet credited" and each
 * record it; HSETNX lets exactly one of them set `r:<tool>`. Checking that the search still exists in the same script
 * matters too: HSETNX on an expired search would create a key without an expiry.
 *
 * KEYS: search keys, newest first. ARGV[1]: the tool; ARGV[2]: the caller's scope; ARGV[3]: '1' to check it, '0' not
 * to (a history holds only searches made in it). Returns {index, query, tools} credited, 0 for spent (found, not counted), -1 for none.
 */
const CLAIM = `
local seen = false
for i = 1, #KEYS do
  local search = redis.call('HMGET', KEYS[i], 's', 'q', 'T')
  if search[1] and (ARGV[3] == '0' or search[1] == ARGV[2]) then
    seen = true
    if redis.call('HEXISTS', KEYS[i], 't:' .. ARGV[1]) == 1 then
      if redis.call('HSETNX', KEYS[i], 'r:' .. ARGV[1], '1') == 1 then
        return {i, search[2], search[3], search[1]}
      end
      return 0
    end
  end
end
if seen then return 0 end
return -1`;

/**
 * Searches in Redis, shared by every API instance: a search id made on one instance is credited by a call on another,
 * and a 2025 session served by several instances keeps one history. Every key expires (searches after `ttlMs`,
 * histories `ttlMs` after their newest search), and every key carries the deployment's prefix (a hash tag on a
 * cluster), so the claim script's keys share one slot.
 */
export class RedisSearchStore implements SearchStore {
  private readonly ttlMs: number;

  constructor(private readonly options: RedisSearchStoreOptions) {
    this.ttlMs = options.ttlMs ?? SEARCH_ID_TTL_MS;
  }

  async add(search: SearchRecord, histories: readonly SearchHistory[]): Promise<void> {
    const { keys } = this.options;
    const key = keys.search(search.id);
    const fields: string[] = ['q', search.query, 's', search.scope, 'T', JSON.stringify(search.tools)];
    for (const tool of search.tools) fields.push(`t:${tool}`, '1');
    await this.run('storing the search', async (redis) => {
      const batch = redis.multi().hset(key, ...fields).pexpire(key, this.ttlMs);
      for (const history of histories) {
        const list = this.historyKey(history);
        batch.lpush(list, search.id).ltrim(list, 0, RECENT_SEARCHES - 1).pexpire(list, this.ttlMs);
      }
      await batch.exec();
    });
  }

  async claim(tool: string, scope: string, from: { id: string } | SearchHistory): Promise<Claim> {
    const ids = 'id' in from ? [from.id] : await this.run('reading recent searches', (redis) => redis.lrange(this.historyKey(from), 0, RECENT_SEARCHES - 1));
    if (ids.length === 0) return { kind: 'id' in from ? 'unknown' : 'spent' };
    const searchKeys = ids.map((id) => this.options.keys.search(id));
    // By id the scope is checked (an id is not a credential); a history is already one caller's.
    const out = (await this.run('crediting the search', (redis) => redis.eval(CLAIM, searchKeys.length, ...searchKeys, tool, scope, 'id' in from ? '1' : '0'))) as
      | number
      | [number, string, string, string];
    if (out === -1) return { kind: 'id' in from ? 'unknown' : 'spent' };
    if (out === 0) return { kind: 'spent' };
    const [index, query, tools, owner] = out as [number, string, string, string];
    return { kind: 'credited', search: { id: ids[index - 1]!, query, tools: JSON.parse(tools) as string[], scope: owner } };
  }

  /** A history's key: its scope or session id hashed, so a key is the same length whatever the id is. */
  private historyKey(history: SearchHistory): string {
    const [kind, id] = 'scope' in history ? (['scope', history.scope] as const) : (['session', history.session] as const);
    return this.options.keys.searchHistory(kind, createHash('sha256').update(id).digest('base64url'));
  }

  private run<T>(action: string, command: (redis: RedisClient) => Promise<T>): Promise<T> {
    const { gate, redis } = this.options;
    return gate ? gate.run(action, command) : withRedis(action, () => command(redis));
  }
}
