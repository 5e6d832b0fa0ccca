import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { RedisKeys, type RedisClient } from '../../../src/redis/connection.js';
import { MemorySearchStore, RECENT_SEARCHES, SEARCH_ID_TTL_MS, type SearchRecord, type SearchStore } from '../../../src/state/searches.js';
import { RedisSearchStore } from '../../../src/state/redis/searches.js';
import { overRedisForms } from '../../helpers/redis-contract.js';

/**
 * One contract over the search stores (STYLE habits 7 and 8): memory, a single Redis and a Redis Cluster. Two Redis
 * stores on one prefix stand for two API instances: a search filed by one is claimed through the other.
 */
interface Subject {
  stores(): [SearchStore, SearchStore];
  /** Redis only: every key this subject made, with its TTL in ms. */
  ttls?(): Promise<Map<string, number>>;
}

const search = (query: string, tools: string[], scope = 'k1'): SearchRecord => ({ id: randomUUID(), query, tools, scope });

function redisSubject(redis: () => RedisClient, prefix: string, hashTag: boolean): Subject {
  const keys = new RedisKeys(prefix, { hashTag });
  return {
    stores: () => [new RedisSearchStore({ redis: redis(), keys }), new RedisSearchStore({ redis: redis(), keys })],
    ttls: async () => {
      const client = redis();
      const nodes = 'nodes' in client ? client.nodes('master') : [client];
      const ttls = new Map<string, number>();
      for (const node of nodes) for (const key of await node.keys(`${keys.prefix}:searches:*`)) ttls.set(key, await node.pttl(key));
      return ttls;
    },
  };
}

function contract(name: string, subject: () => Subject) {
  describe(name, () => {
    it('credits a call by search id once, on any instance, and only for the scope that searched', async () => {
      const [a, b] = subject().stores();
      const made = search('send an email', ['gmail__send', 'outlook__send']);
      await a.add(made, [{ scope: 'k1' }]);
      assert.deepEqual(await b.claim('gmail__send', 'k2', { id: made.id }), { kind: 'unknown' }, 'another key cannot use the id');
      assert.deepEqual(await b.claim('gmail__send', 'k1', { id: made.id }), { kind: 'credited', search: made });
      assert.deepEqual(await a.claim('gmail__send', 'k1', { id: made.id }), { kind: 'spent' }, 'a search counts a tool once');
      assert.deepEqual(await a.claim('weather', 'k1', { id: made.id }), { kind: 'spent' }, 'a tool it did not return');
      assert.deepEqual(await a.claim('gmail__send', 'k1', { id: randomUUID() }), { kind: 'unknown' });
    });

    it("credits the newest search of a scope's history that returned the tool", async () => {
      const [a, b] = subject().stores();
      const older = search('email', ['gmail__send', 'calendar']);
      const newer = search('calendar', ['calendar']);
      await a.add(older, [{ scope: 'k1' }]);
      await b.add(newer, [{ scope: 'k1' }]);
      assert.deepEqual(await b.claim('calendar', 'k1', { scope: 'k1' }), { kind: 'credited', search: newer });
      // The newest that returned it was already credited: an older search does not count it instead.
      assert.deepEqual(await a.claim('calendar', 'k1', { scope: 'k1' }), { kind: 'spent' });
      assert.deepEqual(await a.claim('gmail__send', 'k1', { scope: 'k1' }), { kind: 'credited', search: older });
      assert.deepEqual(await a.claim('gmail__send', 'k2', { scope: 'k2' }), { kind: 'spent' }, 'another scope has no history here');
    });

    it("keeps a session's own history apart from its key's", async () => {
      const [a, b] = subject().stores();
      const mine = search('files', ['fs__read']);
      const theirs = search('files', ['fs__read']);
      await a.add(mine, [{ scope: 'k1' }, { session: 's1' }]);
      await a.add(theirs, [{ scope: 'k1' }, { session: 's2' }]);
      assert.deepEqual(await b.claim('fs__read', 'k1', { session: 's1' }), { kind: 'credited', search: mine });
      assert.deepEqual(await b.claim('fs__read', 'k1', { session: 's1' }), { kind: 'spent' });
      assert.deepEqual(await a.claim('fs__read', 'k1', { session: 's2' }), { kind: 'credited', search: theirs });
    });

    it(`remembers the newest ${RECENT_SEARCHES} searches of a history`, async () => {
      const [a, b] = subject().stores();
      const made = Array.from({ length: RECENT_SEARCHES + 1 }, (_, i) => search(`q${i}`, [`tool${i}`]));
      for (const one of made) await a.add(one, [{ scope: 'k1' }]);
      assert.deepEqual(await b.claim('tool0', 'k1', { scope: 'k1' }), { kind: 'spent' }, 'the oldest fell out');
      assert.equal((await b.claim('tool1', 'k1', { scope: 'k1' })).kind, 'credited');
    });

    it('credits exactly once when instances claim the same search and tool at once', async () => {
      const [a, b] = subject().stores();
      const made = search('weather', ['forecast']);
      await a.add(made, [{ scope: 'k1' }, { session: 'race' }]);
      const claims = await Promise.all(
        Array.from({ length: 10 }, (_, i) => {
          const store = i % 2 ? a : b;
          return i % 3 === 0 ? store.claim('forecast', 'k1', { id: made.id }) : store.claim('forecast', 'k1', i % 3 === 1 ? { scope: 'k1' } : { session: 'race' });
        }),
      );
      assert.equal(claims.filter((claim) => claim.kind === 'credited').length, 1);
    });

    it('every key it writes expires within the search id TTL', { skip: subject().ttls === undefined }, async () => {
      const made = subject();
      const [a] = made.stores();
      const one = search('q', ['t']);
      await a.add(one, [{ scope: 'k1' }, { session: 's' }]);
      await a.claim('t', 'k1', { id: one.id });
      const ttls = await made.ttls!();
      assert.equal(ttls.size, 3, [...ttls.keys()].join(' '));
      for (const [key, ttl] of ttls) assert.ok(ttl > 0 && ttl <= SEARCH_ID_TTL_MS, `${key} expires (pttl ${ttl})`);
    });
  });
}

contract('memory search store', () => ({
  stores: () => {
    const store = new MemorySearchStore();
    return [store, store];
  },
}));

describe('memory search store: expiry', () => {
  it('forgets a search id after SEARCH_ID_TTL_MS', async () => {
    let now = 0;
    const store = new MemorySearchStore(() => now);
    const made = search('q', ['t']);
    await store.add(made, [{ scope: 'k1' }]);
    now = SEARCH_ID_TTL_MS;
    assert.deepEqual(await store.claim('t', 'k1', { id: made.id }), { kind: 'unknown' });
    assert.deepEqual(await store.claim('t', 'k1', { scope: 'k1' }), { kind: 'spent' });
  });
});

overRedisForms('search', (label, redis, prefix, hashTag) => contract(label, () => redisSubject(redis, prefix(), hashTag)));
