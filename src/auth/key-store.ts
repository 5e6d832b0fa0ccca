import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RedisClient, RedisKeys } from '../redis/connection.js';
import { RedisUnavailableError, withRedis, type RedisGate } from '../redis/connection.js';
import type { KeyRecord } from './keys.js';

/**
 * Where virtual keys live: Redis when configured (shared by every instance), else this process's memory, written
 * through to `<stateDir>/keys.json` when a state directory is set (as runtime servers and OAuth grants are).
 */
export interface KeyStore {
  add(record: KeyRecord): Promise<void>;
  bySecretHash(secretHash: string): Promise<KeyRecord | undefined>;
  /** Every key, oldest first. */
  list(): Promise<KeyRecord[]>;
  /** Removes keys by secret hash; returns the records removed. */
  remove(secretHashes: string[]): Promise<KeyRecord[]>;
}

/** The key file's name under stateDir. */
export const KEYS_FILE = 'keys.json';

export class MemoryKeyStore implements KeyStore {
  private readonly records = new Map<string, KeyRecord>();
  private readonly file: string | undefined;

  /** With `stateDir`, the keys stored there are loaded now and every change is written back before it is answered. */
  constructor(stateDir?: string) {
    this.file = stateDir === undefined ? undefined : path.join(stateDir, KEYS_FILE);
    for (const record of this.read()) this.records.set(record.secretHash, record);
  }

  async add(record: KeyRecord): Promise<void> {
    this.write(new Map(this.records).set(record.secretHash, record));
    this.records.set(record.secretHash, record);
  }

  async bySecretHash(secretHash: string): Promise<KeyRecord | undefined> {
    return this.records.get(secretHash);
  }

  async list(): Promise<KeyRecord[]> {
    return [...this.records.values()].sort((a, b) => a.createdAt - b.createdAt);
  }

  async remove(secretHashes: string[]): Promise<KeyRecord[]> {
    const next = new Map(this.records);
    const removed: KeyRecord[] = [];
    for (const hash of secretHashes) {
      const record = next.get(hash);
      if (record && next.delete(hash)) removed.push(record);
    }
    if (removed.length > 0) this.write(next);
    for (const record of removed) this.records.delete(record.secretHash);
    return removed;
  }

  /** A file that exists but cannot be read or parsed stops start-up: starting without its keys would lock them out. */
  private read(): KeyRecord[] {
    if (!this.file) return [];
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new Error(`cannot read the keys from ${this.file}: ${(error as Error).message}`, { cause: error });
    }
    try {
      const stored = JSON.parse(text) as { keys?: unknown };
      if (!Array.isArray(stored.keys)) throw new Error('expected {"keys": [...]}');
      return stored.keys as KeyRecord[];
    } catch (error) {
      throw new Error(`the key file ${this.file} is not valid: ${(error as Error).message}`, { cause: error });
    }
  }

  /**
   * Whole file, replaced atomically (a crash leaves the old one), readable by this user only. It holds the secrets'
   * SHA-256 hashes, never the secrets, but the hashes are what a presented key is matched against.
   */
  private write(records: Map<string, KeyRecord>): void {
    if (!this.file) return;
    mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    const temporary = `${this.file}.${process.pid}.tmp`;
    const keys = [...records.values()].sort((a, b) => a.createdAt - b.createdAt);
    writeFileSync(temporary, `${JSON.stringify({ keys }, null, 2)}\n`, { mode: 0o600 });
    renameSync(temporary, this.file);
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
