import { createHash } from 'node:crypto';
import { withRedis, type RedisClient, type RedisGate, type RedisKeys } from '../../redis/connection.js';
import type { ConversationStore, RankedTurn, SelectionKey, TurnCalls } from '../conversations.js';

export interface RedisConversationStoreOptions {
  redis: RedisClient;
  keys: RedisKeys;
  /** How long a turn's values live after their last use (chat.conversationTtlMs). */
  ttlMs: number;
  /**
   * Commands go through it when given, so a Redis outage costs a turn at most one timeout (the chat face then goes on
   * without the stored state rather than failing the request).
   */
  gate?: RedisGate;
}

/**
 * Candidates looked up per request: the earlier turns of a history, longest first. The turn a request continues is
 * nearly always the first (the caller's previous request); one older than this many assistant turns back is not looked for.
 */
const MAX_CANDIDATES = 256;
/** Ranked turns credited per request: older calls were already shown to (and credited by) earlier requests. */
const MAX_CREDIT_LOOKUPS = 64;
/** Largest tool list stored for one turn (JSON bytes); chat.maxTools bounds it long before in practice. */
const MAX_SELECTION_BYTES = 512 * 1024;

/**
 * The first candidate that holds a selection, its expiry renewed (a conversation in use stays), in one round trip.
 * KEYS: the candidates, longest history first. ARGV[1]: the TTL in ms.
 */
const SELECTION = `
for i = 1, #KEYS do
  local names = redis.call('GET', KEYS[i])
  if names then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    return names
  end
end
return false`;

/**
 * Credits and remembers ranked turns in one step. Each turn is a hash: `s` its scope, `q` its query, `t:<tool>` for
 * every ranked tool not yet seen called. Deleting a `t:` field is the credit, and only the caller whose HDEL removed it
 * gets it: two instances that see the same call at once (a client retrying on another instance, two turns of one
 * conversation in flight) would otherwise both read the turn and both credit it. The scope check sits in the same
 * script, so a turn replaced between the check and the delete cannot be credited to another scope's query.
 *
 * KEYS: the n turns to credit, then (optional) the turn to remember. ARGV: scope, ttl ms, n, then per credited turn its
 * tool count and tools, then (when remembering) the query, the kept count and the kept tools.
 */
const OBSERVE = `
local scope = ARGV[1]
local ttl = ARGV[2]
local n = tonumber(ARGV[3])
local a = 4
local out = {}
for i = 1, n do
  local count = tonumber(ARGV[a])
  a = a + 1
  local turn = redis.call('HMGET', KEYS[i], 's', 'q')
  local own = turn[1] == scope
  for j = 1, count do
    if own and redis.call('HDEL', KEYS[i], 't:' .. ARGV[a]) == 1 then
      out[#out + 1] = turn[2]
      out[#out + 1] = ARGV[a]
    end
    a = a + 1
  end
end
if #KEYS > n then
  local key = KEYS[n + 1]
  local fields = {'s', scope, 'q', ARGV[a]}
  local count = tonumber(ARGV[a + 1])
  a = a + 2
  for j = 1, count do
    fields[#fields + 1] = 't:' .. ARGV[a]
    fields[#fields + 1] = '1'
    a = a + 1
  end
  redis.call('DEL', key)
  redis.call('HSET', key, unpack(fields))
  redis.call('PEXPIRE', key, ttl)
end
return out`;

/**
 * Conversation state in Redis, shared by every API instance of a deployment: a selection is one string key per history
 * and answer (the tool names as JSON), a ranked turn one hash (see OBSERVE). Every key expires `ttlMs` after it was last
 * written or found, so what Redis holds is bounded by the conversations of the last `ttlMs`. All keys carry the
 * deployment's prefix, a hash tag on a Redis Cluster, so the multi-key scripts run on one node.
 */
export class RedisConversationStore implements ConversationStore {
  constructor(private readonly options: RedisConversationStoreOptions) {}

  async selection(candidates: readonly SelectionKey[]): Promise<readonly string[]> {
    if (candidates.length === 0) return [];
    const keys = candidates.slice(0, MAX_CANDIDATES).map((candidate) => this.selectionKey(candidate));
    const found = (await this.run('reading the conversation\'s tools', (redis) =>
      redis.eval(SELECTION, keys.length, ...keys, String(this.options.ttlMs)),
    )) as string | null;
    return found === null ? [] : (JSON.parse(found) as string[]);
  }

  async remember(keys: readonly SelectionKey[], names: readonly string[]): Promise<void> {
    const value = JSON.stringify(names);
    if (keys.length === 0 || Buffer.byteLength(value) > MAX_SELECTION_BYTES) return;
    await this.run('storing the conversation\'s tools', async (redis) => {
      const batch = redis.multi();
      for (const key of keys) batch.set(this.selectionKey(key), value, 'PX', this.options.ttlMs);
      await batch.exec();
    });
  }

  async observe(calls: readonly TurnCalls[], scope: string, ranked?: RankedTurn): Promise<{ query: string; tool: string }[]> {
    const credited = calls.filter((call) => call.tools.length > 0).slice(-MAX_CREDIT_LOOKUPS);
    if (credited.length === 0 && !ranked) return [];
    const { keys } = this.options;
    const redisKeys = credited.map((call) => keys.conversationTurn(call.turn));
    const args: string[] = [scope, String(this.options.ttlMs), String(credited.length)];
    for (const call of credited) args.push(String(call.tools.length), ...call.tools);
    if (ranked) {
      redisKeys.push(keys.conversationTurn(ranked.turn));
      args.push(ranked.query, String(ranked.kept.length), ...ranked.kept);
    }
    const out = (await this.run('remembering the conversation\'s ranked tools', (redis) => redis.eval(OBSERVE, redisKeys.length, ...redisKeys, ...args))) as string[];
    const credits: { query: string; tool: string }[] = [];
    for (let i = 0; i + 1 < out.length; i += 2) credits.push({ query: out[i]!, tool: out[i + 1]! });
    return credits;
  }

  /** One key per history and answer: their hash, so a key is the same length whatever they are. */
  private selectionKey({ key, answer }: SelectionKey): string {
    return this.options.keys.conversationSelection(createHash('sha256').update(`${key}\u0000${answer}`).digest('base64url'));
  }

  private run<T>(action: string, command: (redis: RedisClient) => Promise<T>): Promise<T> {
    const { gate, redis } = this.options;
    return gate ? gate.run(action, command) : withRedis(action, () => command(redis));
  }
}
