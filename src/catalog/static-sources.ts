import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { RedisClient, RedisKeys } from '../redis/connection.js';
import type { RedisBus } from '../redis/bus.js';
import type { Catalog, CatalogSnapshot } from './catalog.js';

/**
 * Where static sources (`PUT /v1/catalog/sources/:source`) live. Validation and clash checks happen in the catalog
 * before anything is stored, so a rejected request changes nothing anywhere.
 */
export interface StaticSources {
  /** @param description what the source says of itself (indexed with its tools, named in search_tools). */
  put(source: string, tools: unknown, description?: string): Promise<CatalogSnapshot>;
  /** False when there was no such source. */
  delete(source: string): Promise<boolean>;
}

/** Static sources of this process only (no Redis). */
export class LocalStaticSources implements StaticSources {
  constructor(private readonly catalog: Catalog) {}

  async put(source: string, tools: unknown, description?: string): Promise<CatalogSnapshot> {
    return this.catalog.setSourceInSlices(source, tools, description === undefined ? {} : { description });
  }

  async delete(source: string): Promise<boolean> {
    return this.catalog.removeSource(source);
  }
}

/**
 * Static sources shared by every API instance: stored in a Redis hash and announced on a channel, so a source PUT to
 * one instance is searchable (and its tools resolvable) on all of them, and survives restarts. After a reconnect the
 * whole hash is read again (an announcement sent while this instance was away is lost); after Redis lost its data this
 * instance stores again what it holds.
 */
export class RedisStaticSources implements StaticSources {
  private readonly origin = randomUUID();
  /** Stored sources this instance applied, as stored (JSON): what it re-announces after Redis lost its data. */
  private readonly held = new Map<string, string>();
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(
    private readonly catalog: Catalog,
    private readonly bus: RedisBus,
    private readonly log: Logger,
  ) {
    this.redis = bus.redis;
    this.keys = bus.keys;
  }

  /** Follows changes made through other instances, then loads every stored source. */
  async start(): Promise<void> {
    await this.bus.listen(this.keys.staticSourcesChannel, {
      message: (text) => {
        const event = JSON.parse(text) as { source: string; origin: string };
        if (event.origin !== this.origin) void this.reload(event.source);
      },
      resync: () => this.reloadAll(),
      restore: () => this.restore(),
    });
    await this.reloadAll();
  }

  /** Stored first, applied second: if Redis is down the request fails and no instance has changed. */
  async put(source: string, tools: unknown, description?: string): Promise<CatalogSnapshot> {
    const valid = await this.catalog.checkInSlices(source, tools);
    // One serialization for Redis and for `held`: at 100k tools it is ~100 MB and a second of work. A source without a
    // description is stored as its tool array, as before descriptions existed.
    const stored = JSON.stringify(description === undefined ? valid : { description, tools: valid });
    await this.bus.writes.run('storing the source', (redis) => redis.hset(this.keys.staticSources, source, stored));
    const snapshot = await this.catalog.setSourceInSlices(source, valid, { validated: true, ...(description === undefined ? {} : { description }) });
    this.held.set(source, stored);
    await this.announce(source);
    return snapshot;
  }

  async delete(source: string): Promise<boolean> {
    const removedStored = await this.bus.writes.run('deleting the source', (redis) => redis.hdel(this.keys.staticSources, source));
    const removedHere = this.catalog.removeSource(source);
    this.held.delete(source);
    if (removedStored > 0) await this.announce(source);
    return removedHere || removedStored > 0;
  }

  /**
   * Stores every source this instance holds that Redis no longer has (HSETNX: a source stored since, by an instance that
   * was told about it later, wins), then applies everything stored and tells the others to reload.
   */
  private async restore(): Promise<void> {
    for (const [source, tools] of this.held) await this.redis.hsetnx(this.keys.staticSources, source, tools);
    const stored = await this.redis.hgetall(this.keys.staticSources);
    for (const [source, tools] of Object.entries(stored)) {
      if (this.held.get(source) !== tools) this.apply(source, tools);
      await this.announce(source);
    }
  }

  /**
   * Makes this instance's stored sources what Redis holds: applies what changed, and drops what another instance deleted
   * meanwhile. Sources from the config file are not in `held`, so they stay.
   */
  private async reloadAll(): Promise<void> {
    const stored = await this.redis.hgetall(this.keys.staticSources);
    for (const [source, tools] of Object.entries(stored)) {
      if (this.held.get(source) !== tools) this.apply(source, tools);
    }
    for (const source of [...this.held.keys()]) {
      if (stored[source] === undefined) {
        this.catalog.removeSource(source);
        this.held.delete(source);
      }
    }
  }

  /** Best effort: the source is stored; an instance that misses this re-reads every source when it reconnects. */
  private async announce(source: string): Promise<void> {
    try {
      // Bounded like the write before it: an outage starting now must not hold the answer for the stored source.
      await this.bus.writes.run('announcing the source', (redis) => redis.publish(this.keys.staticSourcesChannel, JSON.stringify({ source, origin: this.origin })));
    } catch (error) {
      this.log.warn({ err: error, source }, 'could not announce a static source change to other instances');
    }
  }

  private async reload(source: string): Promise<void> {
    try {
      const tools = await this.redis.hget(this.keys.staticSources, source);
      if (tools === null) {
        this.catalog.removeSource(source);
        this.held.delete(source);
      } else this.apply(source, tools);
    } catch (error) {
      this.log.error({ err: error, source }, 'could not reload a static source changed by another instance');
    }
  }

  private apply(source: string, tools: string): void {
    try {
      const parsed = JSON.parse(tools) as unknown[] | { description?: string; tools: unknown[] };
      if (Array.isArray(parsed)) this.catalog.setSource(source, parsed);
      else this.catalog.setSource(source, parsed.tools, undefined, parsed.description);
      this.held.set(source, tools);
    } catch (error) {
      // Another instance accepted it, so this is a clash with something only this instance has (an upstream).
      this.log.error({ err: error, source }, 'stored static source does not fit this instance\'s catalog');
    }
  }
}
