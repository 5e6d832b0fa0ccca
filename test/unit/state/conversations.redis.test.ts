import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedisKeys, type RedisClient } from '../../../src/redis/connection.js';
import { MemoryConversationStore, type ConversationStore } from '../../../src/state/conversations.js';
import { RedisConversationStore } from '../../../src/state/redis/conversations.js';
import { overRedisForms } from '../../helpers/redis-contract.js';

/**
 * One contract, every store (STYLE habits 7 and 8): this process's memory, a single Redis, and a Redis Cluster of three
 * masters, where every key of a deployment must share one hash slot for the multi-key scripts to run. Two Redis stores
 * on one prefix stand for two API instances.
 */
interface Subject {
  /** Two views of one store: the same object in memory, two instances' stores on one Redis. */
  stores(): [ConversationStore, ConversationStore];
  /** Redis only: the keys this run made (to check expiry and remove them after). */
  keys?(): Promise<string[]>;
  redis?: RedisClient;
}

const TTL_MS = 60_000;

function redisSubject(redis: () => RedisClient, prefix: string, hashTag: boolean): Subject {
  const keys = new RedisKeys(prefix, { hashTag });
  const store = () => new RedisConversationStore({ redis: redis(), keys, ttlMs: TTL_MS });
  return {
    stores: () => [store(), store()],
    get redis() {
      return redis();
    },
    keys: async () => {
      // A cluster: every key of the deployment is in one slot, so one node's SCAN of that slot finds them all.
      const client = redis();
      const nodes = 'nodes' in client ? client.nodes('master') : [client];
      const found: string[] = [];
      for (const node of nodes) found.push(...(await node.keys(`${keys.prefix}:conv:*`)));
      return found;
    },
  };
}

function contract(name: string, subject: () => Subject) {
  describe(name, () => {
    it('finds the first candidate that holds a selection, in the order it was filed', async () => {
      const [a, b] = subject().stores();
      await a.remember([{ key: 'h2', answer: 'text:x' }], ['gmail', 'weather', 'calendar']);
      await a.remember([{ key: 'h1', answer: 'text:y' }], ['old']);
      assert.deepEqual(await b.selection([{ key: 'h3', answer: 'text:z' }, { key: 'h2', answer: 'text:x' }, { key: 'h1', answer: 'text:y' }]), ['gmail', 'weather', 'calendar']);
      assert.deepEqual(await b.selection([{ key: 'h2', answer: 'text:other' }]), [], 'another answer after the same history continues nothing');
      assert.deepEqual(await b.selection([]), []);
    });

    it('files one list under several keys, and a later filing under a key replaces it', async () => {
      const [a, b] = subject().stores();
      await a.remember([{ key: 'own', answer: 'calls:1' }, { key: 'response:r1', answer: '' }], ['a', 'b']);
      assert.deepEqual(await b.selection([{ key: 'response:r1', answer: '' }]), ['a', 'b']);
      await b.remember([{ key: 'own', answer: 'calls:1' }], ['a', 'b', 'c']);
      assert.deepEqual(await a.selection([{ key: 'own', answer: 'calls:1' }]), ['a', 'b', 'c']);
    });

    it('credits a ranked tool once per turn, only in its own scope, and replaces a turn ranked again', async () => {
      const [a, b] = subject().stores();
      assert.deepEqual(await a.observe([], 'key1', { turn: 't1', query: 'email bob', kept: ['gmail', 'outlook'] }), []);
      assert.deepEqual(await b.observe([{ turn: 't1', tools: ['gmail'] }], 'key2'), [], 'another scope is not credited');
      assert.deepEqual(await b.observe([{ turn: 't1', tools: ['gmail', 'unranked'] }], 'key1'), [{ query: 'email bob', tool: 'gmail' }]);
      assert.deepEqual(await a.observe([{ turn: 't1', tools: ['gmail'] }], 'key1'), [], 'the same call seen again counts once');
      // Ranked again (a retried request): the new ranking replaces the old one.
      await a.observe([], 'key1', { turn: 't1', query: 'weather', kept: ['forecast'] });
      assert.deepEqual(await b.observe([{ turn: 't1', tools: ['outlook', 'forecast'] }], 'key1'), [{ query: 'weather', tool: 'forecast' }]);
    });

    it('credits a call seen by two instances at once exactly once', async () => {
      const [a, b] = subject().stores();
      await a.observe([], 's', { turn: 'race', query: 'q', kept: ['x', 'y'] });
      const seen = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).observe([{ turn: 'race', tools: ['x', 'y'] }], 's')));
      assert.deepEqual(seen.flat().map((credit) => credit.tool).sort(), ['x', 'y']);
    });

    it('remembers and credits in one call, crediting what was there before', async () => {
      const [a] = subject().stores();
      await a.observe([], 's', { turn: 'p1', query: 'first', kept: ['x'] });
      const credits = await a.observe([{ turn: 'p1', tools: ['x'] }], 's', { turn: 'p2', query: 'second', kept: ['z'] });
      assert.deepEqual(credits, [{ query: 'first', tool: 'x' }]);
      assert.deepEqual(await a.observe([{ turn: 'p2', tools: ['z'] }], 's'), [{ query: 'second', tool: 'z' }]);
    });

    it('stores tool names as given, whatever characters they hold', async () => {
      const [a, b] = subject().stores();
      const names = ['naïve tool', 'a"b', 'x\ny', 'with:colon', '{tag}'];
      await a.remember([{ key: 'odd', answer: 'text:1' }], names);
      assert.deepEqual(await b.selection([{ key: 'odd', answer: 'text:1' }]), names);
      await a.observe([], 'sc', { turn: 'odd', query: 'q', kept: names });
      assert.deepEqual((await b.observe([{ turn: 'odd', tools: names }], 'sc')).map((credit) => credit.tool), names);
    });

    it('every key it writes expires', { skip: subject().keys === undefined }, async () => {
      const made = subject();
      const [a] = made.stores();
      await a.remember([{ key: 'ttl', answer: 'text:1' }], ['a']);
      await a.observe([], 's', { turn: 'ttl', query: 'q', kept: ['a'] });
      const keys = await made.keys!();
      assert.ok(keys.length >= 2);
      for (const key of keys) {
        const ttl = await made.redis!.pttl(key);
        assert.ok(ttl > 0 && ttl <= TTL_MS, `${key} expires (pttl ${ttl})`);
      }
    });
  });
}

contract('memory conversation store', () => ({ stores: () => {
  const store = new MemoryConversationStore();
  return [store, store];
} }));

overRedisForms('conversation', (label, redis, prefix, hashTag) => contract(label, () => redisSubject(redis, prefix(), hashTag)));
