/**
 * The requestState secret store (src/state/redis/rounds.ts) on the suite's single Redis and on a 3-master Cluster:
 * two instances on one prefix agree on one secret; after Redis lost it, the first to notice writes its own and the
 * other adopts it on its next re-read; another prefix (deployment) has its own.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { RedisKeys } from '../../../src/redis/connection.js';
import { RedisRoundSecrets } from '../../../src/state/redis/rounds.js';
import { overRedisForms } from '../../helpers/redis-contract.js';

const log = pino({ level: 'silent' });
const pause = () => new Promise((resolve) => setTimeout(resolve, 1_050));

overRedisForms('round', (label, redis, prefix, hashTag) => {
  describe(`RoundSecrets (${label})`, () => {
    it('instances of one deployment share one secret, kept when Redis loses it; another deployment has its own', async () => {
      const keys = new RedisKeys(prefix(), { hashTag });
      const one = await RedisRoundSecrets.start(redis(), keys, { log });
      const two = await RedisRoundSecrets.start(redis(), keys, { log });
      const other = await RedisRoundSecrets.start(redis(), new RedisKeys(prefix(), { hashTag }), { log });
      try {
        assert.equal(one.current().length, 32);
        assert.deepEqual(two.current(), one.current(), 'the second instance reads the first one\'s secret');
        assert.notDeepEqual(other.current(), one.current());
        const before = one.current();
        await redis().del(keys.roundsSecret);
        await pause();
        // The first to re-read writes back what it holds: the secret everyone signed with goes on.
        assert.deepEqual(await two.refresh(), before);
        await pause();
        assert.deepEqual(await one.refresh(), before);
        assert.ok(await redis().pttl(keys.roundsSecret) > 0, 'the stored secret expires');
      } finally {
        for (const secrets of [one, two, other]) await secrets.close();
      }
    });
  });
});
