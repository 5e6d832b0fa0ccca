import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { MemorySearchLogStore, RedisSearchLogStore, type LogRetention, type SearchLogStore } from '../../../src/analytics/store.js';
import { DAY_MS, type SearchRecord } from '../../../src/analytics/types.js';
import { RedisKeys } from '../../../src/redis/connection.js';
import { REDIS_URL } from '../../helpers/processes.js';
import { overRedisForms } from '../../helpers/redis-contract.js';

/** One contract, both stores (STYLE habit 7): the in-process log and the Redis log every instance shares. */
const redis = new Redis(REDIS_URL);
const prefixes: string[] = [];
after(async () => {
  for (const prefix of prefixes) {
    const leftovers = await redis.keys(`${prefix}*`);
    if (leftovers.length > 0) await redis.del(...leftovers);
  }
  redis.disconnect();
});

const STORES: Record<string, (retention: LogRetention, now: () => number) => SearchLogStore> = {
  memory: (retention, now) => new MemorySearchLogStore(retention, now),
  redis: (retention, now) => {
    const prefix = `trtest-an-${randomUUID().slice(0, 8)}`;
    prefixes.push(prefix);
    return new RedisSearchLogStore({ redis, keys: new RedisKeys(prefix) } as never, retention, now);
  },
};

let clock = 1_000 * DAY_MS;
const now = () => clock;

function record(id: string, time: number, tools: string[], extra: Partial<SearchRecord> = {}): SearchRecord {
  return { id, time, surface: 'mcp', key: 'k1', query: `query ${id}`, results: tools.map((name, i) => ({ name, score: 0.9 - i / 10 })), matched: tools.length, abstained: tools.length === 0, ms: 1.5, ...extra };
}

function logContract(name: string, open: (retention: LogRetention, now: () => number) => SearchLogStore): void {
  describe(`search log store: ${name}`, () => {
    it('keeps the newest maxEntries searches, none older than maxAgeDays, and lists newest first', async () => {
      const store = open({ maxEntries: 3, maxAgeDays: 10 }, now);
      await store.append(record('old', clock - 11 * DAY_MS, ['a']));
      for (const [i, id] of ['r1', 'r2', 'r3', 'r4'].entries()) await store.append(record(id, clock + i, ['a']));
      const all = await store.list({ limit: 100 });
      assert.deepEqual(all.map((kept) => kept.id), ['r4', 'r3', 'r2']);
      assert.deepEqual(all[0]!.results, [{ name: 'a', score: 0.9 }]);
      assert.deepEqual((await store.list({ limit: 1 })).map((kept) => kept.id), ['r4']);
      assert.deepEqual((await store.list({ limit: 100, since: clock + 2 })).map((kept) => kept.id), ['r4', 'r3']);
      assert.deepEqual((await store.list({ limit: 100, filter: (kept) => kept.id !== 'r3' })).map((kept) => kept.id), ['r4', 'r2']);
    });

    it('credits the newest pending search that returned the tool, once, and only within the window', async () => {
      const store = open({ maxEntries: 100, maxAgeDays: 10 }, now);
      const pending = { match: 'caller-and-query', ttlMs: 60_000 };
      await store.append(record('first', clock, ['a', 'b']), pending);
      await store.append(record('second', clock + 1, ['b', 'c']), pending);
      await store.append(record('unrelated', clock + 2, ['a']), { match: 'another', ttlMs: 60_000 });

      assert.equal((await store.credit(pending.match, 'b'))?.id, 'second', 'the newest search holding the tool');
      assert.equal((await store.credit(pending.match, 'b'))?.id, 'first', 'the next call goes to the older one');
      assert.equal(await store.credit(pending.match, 'b'), undefined, 'each search is credited once');
      assert.equal(await store.credit(pending.match, 'zzz'), undefined, 'a tool no search returned');
      assert.equal(await store.credit('nobody', 'a'), undefined);
      const listed = await store.list({ limit: 10 });
      assert.deepEqual(Object.fromEntries(listed.map((kept) => [kept.id, kept.called])), { unrelated: undefined, second: 'b', first: 'b' });
      assert.deepEqual(await store.calledOf(['first', 'unrelated', 'gone']), ['b', undefined, undefined]);
    });

    it('forgets a pending search after its window', async () => {
      const store = open({ maxEntries: 100, maxAgeDays: 10 }, now);
      await store.append(record('brief', clock, ['a']), { match: 'brief-match', ttlMs: 50 });
      clock += 10_000;
      // The Redis list expires on Redis's clock; wait past the ttl for both.
      await new Promise((resolve) => setTimeout(resolve, 120));
      assert.equal(await store.credit('brief-match', 'a'), undefined);
    });

    it('drops what a credited search would point at once the search itself is gone', async () => {
      const store = open({ maxEntries: 1, maxAgeDays: 10 }, now);
      await store.append(record('p', clock, ['a']), { match: 'm', ttlMs: 60_000 });
      await store.append(record('q', clock + 1, ['b']), { match: 'other', ttlMs: 60_000 });
      assert.equal(await store.credit('m', 'a'), undefined, 'the search was trimmed away');
      assert.deepEqual((await store.list({ limit: 10 })).map((kept) => kept.id), ['q']);
    });
  });
}

for (const [name, open] of Object.entries(STORES)) logContract(name, open);

// The same contract on the suite's Redis Cluster (hash-tagged keys: the scripts' keys share one slot).
overRedisForms('analytics', (label, cluster, prefix, hashTag) => {
  if (!hashTag) return; // the single Redis runs above
  logContract(label, (retention, now) => new RedisSearchLogStore({ redis: cluster(), keys: new RedisKeys(prefix(), { hashTag }) } as never, retention, now));
});
