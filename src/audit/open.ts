/** Picks the audit store the settings call for: Redis when configured, files under stateDir, else memory. */
import path from 'node:path';
import type { RedisClient, RedisKeys } from '../redis/connection.js';
import { FileAuditStore } from './file-store.js';
import { RedisAuditStore } from './redis-store.js';
import type { AuditSettings } from './settings.js';
import { MemoryAuditStore, type AuditStore } from './store.js';

/** Most records an in-memory trail keeps (no Redis, no stateDir): it is for a look at recent calls, not for keeping. */
export const MEMORY_AUDIT_ENTRIES = 10_000;

export interface AuditStoreOptions {
  settings: Pick<AuditSettings, 'maxEntries' | 'maxAgeDays'>;
  redis?: { client: RedisClient; keys: RedisKeys };
  stateDir?: string;
}

export function openAuditStore({ settings, redis, stateDir }: AuditStoreOptions): { store: AuditStore; where: string } {
  const { maxEntries, maxAgeDays } = settings;
  if (redis) return { store: new RedisAuditStore({ redis: redis.client, keys: redis.keys, maxEntries, maxAgeDays }), where: `Redis stream ${redis.keys.key('audit')}` };
  if (stateDir !== undefined) {
    const dir = path.join(stateDir, 'audit');
    return { store: new FileAuditStore({ dir, maxEntries, maxAgeDays }), where: `files in ${dir}` };
  }
  return { store: new MemoryAuditStore(Math.min(maxEntries, MEMORY_AUDIT_ENTRIES)), where: 'memory (set stateDir or Redis to keep it)' };
}
