import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OAuthDiscoveryState, StoredOAuthClientInformation, StoredOAuthTokens } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import type { RedisBus } from '../../../redis/bus.js';
import type { Sealer } from './crypto.js';

/** Why a server waits for an admin: no grant yet, a refresh that could not be done, or the grant was revoked/expired. */
export type NeedsAuthorizationReason = 'never_connected' | 'refresh_failed' | 'revoked';

/** Everything toolrouter holds for one OAuth upstream. Secrets: `client.client_secret` and `tokens`. */
export interface OAuthRecord {
  /** The server URL these credentials were obtained for; a record for another URL is ignored (the config changed). */
  url: string;
  client?: StoredOAuthClientInformation;
  tokens?: StoredOAuthTokens;
  discovery?: OAuthDiscoveryState;
  /** The redirect URI the client was registered and authorized with. */
  redirectUrl?: string;
  /** Set when the grant stopped working; cleared by new tokens. Other instances read the reason from here. */
  problem?: { reason: NeedsAuthorizationReason; message: string; at: string };
  /** A per-user server's grant: whose (Access.subject). Its record is stored under a key of its own (userRecordKey). */
  subject?: string;
  updatedAt: string;
}

/** An `authorize` waiting for the browser to come back with `state`. */
export interface PendingAuthorization {
  server: string;
  /** For a per-user server: the subject whose grant the browser step obtains. */
  subject?: string;
  url: string;
  verifier: string;
  redirectUrl: string;
  createdAt: string;
  /**
   * SHA-256 (hex) of the browser binding: the secret the connect page puts in a cookie once the browser has shown it is
   * who started the flow. The callback completes the flow only in a browser holding it (src/mcp/upstream/oauth/binding.ts).
   */
  binding?: string;
}

/**
 * The toolrouter link an authorization is handed out as (`/oauth/connect/<flowId>`), waiting for the browser that
 * proves it is the flow's starter; single use, and gone with the pending authorization.
 */
export interface ConnectLink {
  /** The pending authorization's `state` (also names the binding cookie). */
  state: string;
  server: string;
  /** Per-user flows: the subject the grant is for (Access.subject). Undefined: the server's shared (admin) grant. */
  subject?: string;
  /** The key that started it, when a key did (an `assert_user` key starting for one of its users is accepted again). */
  keyId?: string;
  /** Where the browser goes once it passed: the upstream authorization server's URL. */
  authorizationUrl: string;
  /** The browser binding itself, given to the browser as a cookie (its hash is in the pending authorization). */
  binding: string;
  /** The external callback URL: its path scopes the cookie. */
  redirectUrl: string;
  expiresAt: number;
}

/**
 * Where OAuth records live: Redis (shared by every instance, sealed), or this process (and a sealed state file when
 * `stateDir` is set). All writes to a server's record happen under `withLock`.
 */
export interface OAuthStore {
  readonly kind: 'redis' | 'memory' | 'file';
  read(server: string): Promise<OAuthRecord | undefined>;
  write(server: string, record: OAuthRecord): Promise<void>;
  /**
   * Every record of a family, `prefix` being `<family>:` (a per-user server's grants: `<server>:user:`), as key →
   * record. Redis lists them from an index kept beside the records (cluster-correct, see RedisOAuthStore.list).
   */
  list(prefix: string): Promise<Map<string, OAuthRecord>>;
  /** Writes only where nothing is stored (putting back what an emptied Redis lost); false when a record was there. */
  writeIfAbsent(server: string, record: OAuthRecord): Promise<boolean>;
  putPending(state: string, pending: PendingAuthorization, ttlMs: number): Promise<void>;
  /** Single use: the entry is gone once taken. */
  takePending(state: string): Promise<PendingAuthorization | undefined>;
  putConnect(flowId: string, link: ConnectLink, ttlMs: number): Promise<void>;
  /** Reads a connect link without using it (the page asks for a key first). */
  readConnect(flowId: string): Promise<ConnectLink | undefined>;
  /** Single use: the link is gone once taken (a browser passed the connect page). */
  takeConnect(flowId: string): Promise<ConnectLink | undefined>;
  /** Runs `work` holding the server's lock (across instances with Redis); waits for a holder to finish first. */
  withLock<T>(server: string, ttlMs: number, work: () => Promise<T>): Promise<T>;
  /** Tells every instance that a server's record changed. */
  announce(server: string): Promise<void>;
  /**
   * `onChange(server)` for every announcement (including this instance's own); also after a Redis reconnect (all).
   * `onRestore` when Redis lost its data: put back what this instance holds.
   */
  listen(onChange: (server: string | undefined) => void, onRestore?: () => Promise<void>): Promise<void>;
}

const LOCK_POLL_MS = 50;
/** Connect links live beside pending authorizations, under their own prefix (a state never starts with it: base64url has no ':'). */
const CONNECT_PREFIX = 'connect:';

/** A record named `<family>:<member>` (a per-user grant, `gh:user:<hash>`) belongs to a family; a server's own does not. */
function familyOf(name: string): { name: string; member: string } | undefined {
  const cut = name.lastIndexOf(':');
  return cut <= 0 || cut === name.length - 1 ? undefined : { name: name.slice(0, cut), member: name.slice(cut + 1) };
}

/** A MULTI's results, throwing the first command's error (EXEC answers null when the transaction was aborted). */
function checked(results: [Error | null, unknown][] | null): [Error | null, unknown][] {
  if (results === null) throw new Error('the Redis transaction was aborted');
  for (const [error] of results) if (error) throw error;
  return results;
}

/**
 * Records in Redis, each sealed (AES-256-GCM, src/mcp/upstream/oauth/crypto.ts) under its own key: nothing in Redis reads as a
 * token, a client secret or a PKCE verifier.
 *
 * Two instances and a rotating refresh token: a refresh token may be used once (the authorization server rotates it),
 * so two instances that both got a 401 must not both refresh with it, or the second refresh fails with invalid_grant
 * and the grant looks revoked. Each refresh runs under a Redis lock per server (`SET key NX PX lockTtlMs`, released by
 * compare-and-delete so an expired holder cannot free a successor's lock), and the holder first re-reads the record:
 * if the access token there is not the one that was refused, another instance refreshed meanwhile and the new token
 * is simply used. Only the first instance refreshes; the rest wait on the lock and then re-read. The lock's TTL bounds
 * a crashed holder; a refresh slower than the TTL could overlap one more, so the TTL (30 s) is far above a token call.
 */
export class RedisOAuthStore implements OAuthStore {
  readonly kind = 'redis' as const;

  constructor(
    private readonly bus: RedisBus,
    private readonly sealer: Sealer,
    private readonly log: Logger,
  ) {}

  async read(server: string): Promise<OAuthRecord | undefined> {
    const key = this.bus.keys.oauthServer(server);
    const sealed = await this.bus.redis.get(key);
    return sealed === null ? undefined : this.openRecord<OAuthRecord>(sealed, key);
  }

  async write(server: string, record: OAuthRecord): Promise<void> {
    const key = this.bus.keys.oauthServer(server);
    const sealed = this.sealer.seal(JSON.stringify(record), key);
    const family = familyOf(server);
    if (!family) {
      await this.bus.redis.set(key, sealed);
      return;
    }
    checked(await this.bus.redis.multi().set(key, sealed).sadd(this.bus.keys.oauthIndex(family.name), family.member).exec());
  }

  /**
   * A family's records from its index set, not SCAN: on a Redis Cluster ioredis sends SCAN to one node only (it names no
   * key), and even on one Redis a SCAN promises only the keys present for its whole run. The index is written in the
   * same MULTI as each record (one hash slot: every key shares the deployment's hash tag), so no record exists, even
   * for an instant or after a crash between two writes, without its index entry; SSCAN then returns every member
   * present from its start to its end, and records are never deleted (a revoked grant stays as a tombstone).
   */
  async list(prefix: string): Promise<Map<string, OAuthRecord>> {
    const family = prefix.endsWith(':') ? prefix.slice(0, -1) : undefined;
    if (!family || familyOf(`${prefix}x`)?.name !== family) throw new Error(`OAuth records are listed by family ("<server>:user:"), not by "${prefix}"`);
    const index = this.bus.keys.oauthIndex(family);
    const found = new Map<string, OAuthRecord>();
    let cursor = '0';
    do {
      const [next, members] = await this.bus.redis.sscan(index, cursor, 'COUNT', 500);
      cursor = next;
      if (members.length === 0) continue;
      const keys = members.map((member) => this.bus.keys.oauthServer(`${prefix}${member}`));
      const values = await this.bus.redis.mget(...keys);
      values.forEach((sealed, position) => {
        const record = sealed === null ? undefined : this.openRecord<OAuthRecord>(sealed, keys[position]!);
        if (record) found.set(`${prefix}${members[position]}`, record);
      });
    } while (cursor !== '0');
    return found;
  }

  async writeIfAbsent(server: string, record: OAuthRecord): Promise<boolean> {
    const key = this.bus.keys.oauthServer(server);
    const sealed = this.sealer.seal(JSON.stringify(record), key);
    const family = familyOf(server);
    if (!family) return (await this.bus.redis.set(key, sealed, 'NX')) === 'OK';
    // The index entry is added either way: where the record was already there, it is (or should have been) indexed.
    const results = checked(await this.bus.redis.multi().set(key, sealed, 'NX').sadd(this.bus.keys.oauthIndex(family.name), family.member).exec());
    return results[0]?.[1] === 'OK';
  }

  async putPending(state: string, pending: PendingAuthorization, ttlMs: number): Promise<void> {
    const key = this.bus.keys.oauthPending(state);
    await this.bus.redis.set(key, this.sealer.seal(JSON.stringify(pending), key), 'PX', ttlMs);
  }

  async takePending(state: string): Promise<PendingAuthorization | undefined> {
    const key = this.bus.keys.oauthPending(state);
    const sealed = await this.bus.redis.getdel(key);
    return sealed === null ? undefined : this.openRecord<PendingAuthorization>(sealed, key);
  }

  async putConnect(flowId: string, link: ConnectLink, ttlMs: number): Promise<void> {
    const key = this.bus.keys.oauthPending(`${CONNECT_PREFIX}${flowId}`);
    await this.bus.redis.set(key, this.sealer.seal(JSON.stringify(link), key), 'PX', ttlMs);
  }

  async readConnect(flowId: string): Promise<ConnectLink | undefined> {
    const key = this.bus.keys.oauthPending(`${CONNECT_PREFIX}${flowId}`);
    const sealed = await this.bus.redis.get(key);
    return sealed === null ? undefined : this.openRecord<ConnectLink>(sealed, key);
  }

  async takeConnect(flowId: string): Promise<ConnectLink | undefined> {
    const key = this.bus.keys.oauthPending(`${CONNECT_PREFIX}${flowId}`);
    const sealed = await this.bus.redis.getdel(key);
    return sealed === null ? undefined : this.openRecord<ConnectLink>(sealed, key);
  }

  async withLock<T>(server: string, ttlMs: number, work: () => Promise<T>): Promise<T> {
    const key = this.bus.keys.oauthLock(server);
    const holder = randomBytes(16).toString('hex');
    const deadline = Date.now() + ttlMs;
    while ((await this.bus.redis.set(key, holder, 'PX', ttlMs, 'NX')) !== 'OK') {
      if (Date.now() > deadline) throw new Error(`the OAuth lock of server "${server}" stayed held for ${ttlMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
    }
    try {
      return await work();
    } finally {
      await this.bus.redis
        .eval("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end", 1, key, holder)
        .catch((error: unknown) => this.log.warn({ err: error, server }, 'could not release the OAuth lock; it expires on its own'));
    }
  }

  async announce(server: string): Promise<void> {
    await this.bus.redis.publish(this.bus.keys.oauthChannel, server);
  }

  async listen(onChange: (server: string | undefined) => void, onRestore?: () => Promise<void>): Promise<void> {
    await this.bus.listen(this.bus.keys.oauthChannel, {
      message: (server) => onChange(server),
      // Announcements missed while disconnected: every server re-checks its record.
      resync: async () => onChange(undefined),
      // Redis came back empty: the grants this instance last read go back (the first instance to restore wins), so an
      // emptied Redis does not send every OAuth server back to the admin.
      ...(onRestore ? { restore: onRestore } : {}),
    });
  }

  private openRecord<T>(sealed: string, key: string): T | undefined {
    try {
      return JSON.parse(this.sealer.open(sealed, key)) as T;
    } catch (error) {
      // Sealed with another TOOLROUTER_SECRET_KEY (rotated) or damaged: as if absent, so the admin authorizes again.
      this.log.warn({ key, reason: (error as Error).message }, 'an OAuth record in Redis cannot be opened with this TOOLROUTER_SECRET_KEY; ignoring it');
      return undefined;
    }
  }
}

/**
 * Records in this process; with `stateDir`, also in `<stateDir>/oauth.json` (each record sealed, file mode 0600), so a
 * single-node restart keeps its grants. Pending authorizations stay in memory: a restart cancels a browser step.
 */
export class MemoryOAuthStore implements OAuthStore {
  readonly kind: 'memory' | 'file';
  private readonly records = new Map<string, OAuthRecord>();
  private readonly pending = new Map<string, { value: PendingAuthorization; expiresAt: number }>();
  private readonly connects = new Map<string, { value: ConnectLink; expiresAt: number }>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly listeners: ((server: string | undefined) => void)[] = [];
  private readonly file: string | undefined;

  constructor(
    private readonly options: { stateDir?: string; sealer?: Sealer; log: Logger },
  ) {
    this.kind = options.stateDir ? 'file' : 'memory';
    if (options.stateDir) {
      if (!options.sealer) throw new Error('a state file of OAuth tokens needs TOOLROUTER_SECRET_KEY');
      this.file = join(options.stateDir, 'oauth.json');
      this.load();
    }
  }

  async read(server: string): Promise<OAuthRecord | undefined> {
    const record = this.records.get(server);
    return record === undefined ? undefined : structuredClone(record);
  }

  async write(server: string, record: OAuthRecord): Promise<void> {
    this.records.set(server, structuredClone(record));
    this.save();
  }

  async list(prefix: string): Promise<Map<string, OAuthRecord>> {
    return new Map([...this.records].filter(([key]) => key.startsWith(prefix)).map(([key, record]) => [key, structuredClone(record)]));
  }

  async writeIfAbsent(server: string, record: OAuthRecord): Promise<boolean> {
    if (this.records.has(server)) return false;
    await this.write(server, record);
    return true;
  }

  async putPending(state: string, pending: PendingAuthorization, ttlMs: number): Promise<void> {
    const now = Date.now();
    for (const [key, entry] of this.pending) if (entry.expiresAt <= now) this.pending.delete(key);
    this.pending.set(state, { value: pending, expiresAt: now + ttlMs });
  }

  async takePending(state: string): Promise<PendingAuthorization | undefined> {
    const entry = this.pending.get(state);
    this.pending.delete(state);
    return entry && entry.expiresAt > Date.now() ? entry.value : undefined;
  }

  async putConnect(flowId: string, link: ConnectLink, ttlMs: number): Promise<void> {
    const now = Date.now();
    for (const [key, entry] of this.connects) if (entry.expiresAt <= now) this.connects.delete(key);
    this.connects.set(flowId, { value: structuredClone(link), expiresAt: now + ttlMs });
  }

  async readConnect(flowId: string): Promise<ConnectLink | undefined> {
    const entry = this.connects.get(flowId);
    return entry && entry.expiresAt > Date.now() ? structuredClone(entry.value) : undefined;
  }

  async takeConnect(flowId: string): Promise<ConnectLink | undefined> {
    const entry = this.connects.get(flowId);
    this.connects.delete(flowId);
    return entry && entry.expiresAt > Date.now() ? entry.value : undefined;
  }

  async withLock<T>(server: string, _ttlMs: number, work: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(server) ?? Promise.resolve();
    const run = previous.catch(() => {}).then(work);
    const tail = run.catch(() => {});
    this.locks.set(server, tail);
    void tail.then(() => {
      if (this.locks.get(server) === tail) this.locks.delete(server);
    });
    return run;
  }

  async announce(server: string): Promise<void> {
    for (const listener of this.listeners) listener(server);
  }

  async listen(onChange: (server: string | undefined) => void): Promise<void> {
    this.listeners.push(onChange);
  }

  private load(): void {
    let text: string;
    try {
      text = readFileSync(this.file!, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new Error(`cannot read the OAuth state file ${this.file}: ${(error as Error).message}`, { cause: error });
    }
    const sealed = JSON.parse(text) as { servers?: Record<string, string> };
    for (const [server, value] of Object.entries(sealed.servers ?? {})) {
      try {
        this.records.set(server, JSON.parse(this.options.sealer!.open(value, `oauth:${server}`)) as OAuthRecord);
      } catch (error) {
        this.options.log.warn({ server, file: this.file, reason: (error as Error).message }, 'an OAuth record in the state file cannot be opened with this TOOLROUTER_SECRET_KEY; ignoring it');
      }
    }
  }

  private save(): void {
    if (!this.file) return;
    const servers = Object.fromEntries([...this.records].map(([server, record]) => [server, this.options.sealer!.seal(JSON.stringify(record), `oauth:${server}`)]));
    mkdirSync(this.options.stateDir!, { recursive: true, mode: 0o700 });
    // Written aside and renamed: a crash mid-write leaves the previous file, never half of one.
    const temporary = `${this.file}.${process.pid}.tmp`;
    writeFileSync(temporary, JSON.stringify({ servers }, null, 2), { mode: 0o600 });
    renameSync(temporary, this.file);
  }
}
