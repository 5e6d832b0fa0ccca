import { randomUUID } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { connectRedis, type RedisClient } from '../../src/redis/connection.js';
import { redisSettingsSchema, type RedisSettings } from '../../src/redis/settings.js';
import { REDIS_URL } from './processes.js';
import { RedisClusterFixture } from './redis-topologies.js';

/**
 * Runs a store's contract over the suite's single Redis and over a three-master Cluster (hash-tagged keys), as the
 * Redis forms a deployment may use. `contract(label, redis, prefix, hashTag)` declares the cases; `prefix()` is a fresh
 * key prefix per call, so cases never see each other's keys; the single Redis's keys are removed after. `settings()`
 * reaches the same Redis for a store that opens its own connections (a RedisBus).
 */
export function overRedisForms(
  kind: string,
  contract: (label: string, redis: () => RedisClient, prefix: () => string, hashTag: boolean, settings: () => RedisSettings) => void,
): void {
  describe(`Redis ${kind} stores`, () => {
    let single: RedisClient;
    const base = `tr${kind}-${randomUUID().slice(0, 8)}`;
    let run = 0;
    before(() => {
      single = connectRedis(redisSettingsSchema.parse({ url: REDIS_URL }), `${kind}-contract`);
    });
    after(async () => {
      const keys = await single.keys(`${base}*`);
      if (keys.length > 0) await single.del(...keys);
      await single.quit();
    });
    contract('single Redis', () => single, () => `${base}-${run++}`, false, () => redisSettingsSchema.parse({ url: REDIS_URL }));
  });

  describe(`Redis Cluster ${kind} store`, () => {
    const cluster = new RedisClusterFixture();
    let client: RedisClient;
    let run = 0;
    before(async () => {
      await cluster.start();
      client = connectRedis(redisSettingsSchema.parse({ cluster: { nodes: cluster.urls } }), `${kind}-contract-cluster`);
    });
    after(async () => {
      await client?.quit().catch(() => {});
      await cluster.stop();
    });
    contract('Redis Cluster (hash-tagged keys)', () => client, () => `tr${kind}${run++}`, true, () => redisSettingsSchema.parse({ cluster: { nodes: cluster.urls } }));
  });
}
