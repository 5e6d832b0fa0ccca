/**
 * Upstream servers added at run time (`PUT /v1/mcp/servers/:name`): where they are kept so that every API instance
 * connects to them and a restart keeps them. With Redis: a hash and an announcement, the way static catalog sources
 * are shared (src/catalog/static-sources.ts), re-read after a reconnect and stored again after Redis lost its data.
 * Without Redis: this process, and a state file under `stateDir` when one is set. Their configs hold secrets (header
 * and env values); they are stored as given and never logged.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { RedisBus } from '../../redis/bus.js';
import type { RedisClient, RedisKeys } from '../../redis/connection.js';
import type { UpstreamServerConfig } from './index.js';

/** What applies a stored server: the upstream manager. */
export interface RuntimeServerTarget {
  put(name: string, config: UpstreamServerConfig): Promise<void>;
  remove(name: string): Promise<boolean>;
}

export interface RuntimeServerStore {
  /** Loads the stored servers (and, with Redis, follows other instances' changes). */
  start(): Promise<void>;
  /** Stored first, applied second: when storing fails, nothing changed anywhere. */
  put(name: string, config: UpstreamServerConfig): Promise<void>;
  /** False when no such runtime server was stored. */
  delete(name: string): Promise<boolean>;
}

/** The state file's name under stateDir. */
export const STATE_FILE = 'mcp-servers.json';

/** This process only, written through to `<stateDir>/mcp-servers.json` when a directory is given. */
export class LocalRuntimeServers implements RuntimeServerStore {
  private readonly servers = new Map<string, UpstreamServerConfig>();
  private readonly file: string | undefined;

  constructor(
    private readonly target: RuntimeServerTarget,
    stateDir: string | undefined,
    private readonly log: Logger,
  ) {
    this.file = stateDir === undefined ? undefined : path.join(stateDir, STATE_FILE);
  }

  async start(): Promise<void> {
    if (!this.file) return;
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new Error(`cannot read the runtime MCP servers from ${this.file}: ${(error as Error).message}`, { cause: error });
    }
    const stored = JSON.parse(text) as { servers?: Record<string, UpstreamServerConfig> };
    for (const [name, config] of Object.entries(stored.servers ?? {})) {
      try {
        await this.target.put(name, config);
        this.servers.set(name, config);
      } catch (error) {
        this.log.error({ upstream: name, reason: (error as Error).message }, 'a stored runtime MCP server does not fit this configuration; left out');
      }
    }
  }

  async put(name: string, config: UpstreamServerConfig): Promise<void> {
    const next = new Map(this.servers).set(name, config);
    this.write(next);
    this.servers.set(name, config);
    await this.target.put(name, config);
  }

  async delete(name: string): Promise<boolean> {
    if (!this.servers.has(name)) return false;
    const next = new Map(this.servers);
    next.delete(name);
    this.write(next);
    this.servers.delete(name);
    await this.target.remove(name);
    return true;
  }

  /** Whole file, replaced atomically (a crash leaves the old one), readable by this user only: it holds secrets. */
  private write(servers: Map<string, UpstreamServerConfig>): void {
    if (!this.file) return;
    mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    const temporary = `${this.file}.${process.pid}.tmp`;
    writeFileSync(temporary, `${JSON.stringify({ servers: Object.fromEntries(servers) }, null, 2)}\n`, { mode: 0o600 });
    renameSync(temporary, this.file);
  }
}

/** Shared by every API instance through Redis. */
export class RedisRuntimeServers implements RuntimeServerStore {
  private readonly origin = randomUUID();
  /** Stored servers this instance applied, as stored (JSON): what it stores again after Redis lost its data. */
  private readonly held = new Map<string, string>();
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(
    private readonly target: RuntimeServerTarget,
    private readonly bus: RedisBus,
    private readonly log: Logger,
  ) {
    this.redis = bus.redis;
    this.keys = bus.keys;
  }

  async start(): Promise<void> {
    await this.bus.listen(this.keys.mcpServersChannel, {
      message: (text) => {
        const event = JSON.parse(text) as { server: string; origin: string };
        if (event.origin !== this.origin) void this.reload(event.server);
      },
      resync: () => this.reloadAll(),
      restore: () => this.restore(),
    });
    await this.reloadAll();
  }

  async put(name: string, config: UpstreamServerConfig): Promise<void> {
    const stored = JSON.stringify(config);
    await this.bus.writes.run('storing the MCP server', (redis) => redis.hset(this.keys.mcpServers, name, stored));
    this.held.set(name, stored);
    await this.target.put(name, config);
    await this.announce(name);
  }

  async delete(name: string): Promise<boolean> {
    const removed = await this.bus.writes.run('deleting the MCP server', (redis) => redis.hdel(this.keys.mcpServers, name));
    const here = this.held.delete(name);
    if (here) await this.target.remove(name);
    if (removed > 0) await this.announce(name);
    return here || removed > 0;
  }

  /** Redis lost its data: stores again what this instance holds (HSETNX: one stored since wins), then applies all. */
  private async restore(): Promise<void> {
    for (const [name, config] of this.held) await this.redis.hsetnx(this.keys.mcpServers, name, config);
    const stored = await this.redis.hgetall(this.keys.mcpServers);
    for (const [name, config] of Object.entries(stored)) {
      if (this.held.get(name) !== config) await this.apply(name, config);
      await this.announce(name);
    }
  }

  /** Makes this instance's runtime servers what Redis holds: applies what changed, drops what was deleted meanwhile. */
  private async reloadAll(): Promise<void> {
    const stored = await this.redis.hgetall(this.keys.mcpServers);
    for (const [name, config] of Object.entries(stored)) if (this.held.get(name) !== config) await this.apply(name, config);
    for (const name of [...this.held.keys()]) {
      if (stored[name] === undefined) {
        this.held.delete(name);
        await this.target.remove(name);
      }
    }
  }

  private async reload(name: string): Promise<void> {
    try {
      const config = await this.redis.hget(this.keys.mcpServers, name);
      if (config !== null) await this.apply(name, config);
      else if (this.held.delete(name)) await this.target.remove(name);
    } catch (error) {
      this.log.error({ err: error, upstream: name }, 'could not reload an MCP server changed by another instance');
    }
  }

  private async apply(name: string, config: string): Promise<void> {
    try {
      await this.target.put(name, JSON.parse(config) as UpstreamServerConfig);
      this.held.set(name, config);
    } catch (error) {
      // Another instance accepted it, so this is a clash with something only this instance has (its config file).
      this.log.error({ upstream: name, reason: (error as Error).message }, 'stored runtime MCP server does not fit this instance\'s configuration; left out');
    }
  }

  /** Best effort: the server is stored; an instance that misses this re-reads every server when it reconnects. */
  private async announce(name: string): Promise<void> {
    try {
      await this.redis.publish(this.keys.mcpServersChannel, JSON.stringify({ server: name, origin: this.origin }));
    } catch (error) {
      this.log.warn({ err: error, upstream: name }, 'could not announce an MCP server change to other instances');
    }
  }
}
