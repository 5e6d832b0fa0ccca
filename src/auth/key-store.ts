import type { RedisClient, RedisKeys } from '../redis/connection.js';
import { RedisUnavailableError, withRedis, type RedisGate } from '../redis/connection.js';
import type { KeyRecord } from './keys.js';

/** Where virtual keys live: Redis when configured (shared by every instance), else this process's memory. */
export interface KeyStore {
  add(record: KeyRecord): Promise<void>;
  bySecretHash(secretHash: string): Promise<KeyRecord | undefined>;
  /** Every key, oldest first. */
  list(): Promise<KeyRecord[]>;
  /** Removes keys by secret hash; returns the records removed. */
  remove(secretHashes: string[]): Promise<KeyRecord[]>;
}

export class MemoryKeyStore implements KeyStore {
  private readonly records = new Map<string, KeyRecord>();

  async add(record: KeyRecord): Promise<void> {
    this.records.set(record.secretHash, record);
  }

  async bySecretHash(secretHash: string): Promise<KeyRecord | undefined> {
    return this.records.get(secretHash);
  }

  async list(): Promise<KeyRecord[]> {
    return [...this.records.values()].sort((a, b) => a.createdAt - b.createdAt);
  }

  async remove(secretHashes: string[]): Promise<KeyRecord[]> {
    const removed: KeyRecord[] = [];
    for (const hash of secretHashes) {
      const record = this.records.get(hash);
      if (record && this.records.delete(hash)) removed.push(record);
    }
    return removed;
  }
}

/**
 * One Redis hash, secret hash → JSON record. Lookups are one HGET, so a deleted key stops working on every instance at
 * once. While Redis is away, keys this instance has seen keep working from their last known record (a search must not
 * fail because Redis blinked); unseen keys and key management fail with 503.
 */
export class RedisKeyStore implements KeyStore {
  private readonly lastKnown = new Map<string, KeyRecord>();
  /** The stored JSON each lastKnown record was parsed from: an unchanged key is not parsed again on every request. */
  private readonly lastRaw = new Map<string, string>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** Lookups on a request's path go through it, so an outage answers from lastKnown at once. */
    private readonly gate?: RedisGate,
    /** Key writes go through it (the bus's `writes`): 503 within redis.commandTimeoutMs during an outage. */
    private readonly writes?: RedisGate,
  ) {}

  private write<T>(action: string, command: (redis: RedisClient) => Promise<T>): Promise<T> {
    return this.writes ? this.writes.run(action, command) : withRedis(action, () => command(this.redis));
  }

  async add(record: KeyRecord): Promise<void> {
    await this.write('storing the key', (redis) => redis.hset(this.keys.apiKeys, record.secretHash, JSON.stringify(record)));
  }

  async bySecretHash(secretHash: string): Promise<KeyRecord | undefined> {
    let stored: string | null;
    try {
      stored = this.gate
        ? await this.gate.run('checking the key', (redis) => redis.hget(this.keys.apiKeys, secretHash))
        : await this.redis.hget(this.keys.apiKeys, secretHash);
    } catch (error) {
      const known = this.lastKnown.get(secretHash);
      if (known) return known;
      return withRedis('checking the key', () => Promise.reject(error instanceof RedisUnavailableError && error.cause !== undefined ? error.cause : error));
    }
    if (stored === null) {
      this.lastKnown.delete(secretHash);
      this.lastRaw.delete(secretHash);
      return undefined;
    }
    const known = this.lastKnown.get(secretHash);
    // The same record object for the same stored text, so what is derived from it (Access.forKey) is reused.
    if (known && this.lastRaw.get(secretHash) === stored) return known;
    const record = JSON.parse(stored) as KeyRecord;
    this.lastKnown.set(secretHash, record);
    this.lastRaw.set(secretHash, stored);
    return record;
  }

  async list(): Promise<KeyRecord[]> {
    const all = await withRedis('listing keys', () => this.redis.hvals(this.keys.apiKeys));
    return all.map((json) => JSON.parse(json) as KeyRecord).sort((a, b) => a.createdAt - b.createdAt);
  }

  async remove(secretHashes: string[]): Promise<KeyRecord[]> {
    if (secretHashes.length === 0) return [];
    const stored = await this.write('deleting keys', (redis) => redis.hmget(this.keys.apiKeys, ...secretHashes));
    await this.write('deleting keys', (redis) => redis.hdel(this.keys.apiKeys, ...secretHashes));
    for (const hash of secretHashes) {
      this.lastKnown.delete(hash);
      this.lastRaw.delete(hash);
    }
    return stored.filter((json): json is string => json !== null).map((json) => JSON.parse(json) as KeyRecord);
  }
}
