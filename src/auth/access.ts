import type { CatalogEntry } from '../catalog/catalog.js';
import type { KeyRecord } from './keys.js';

const byRecord = new WeakMap<KeyRecord, Access>();

/**
 * Who is asking, and what they may see: the admin (or anyone, on an open service) sees everything; a virtual key sees
 * the tools of its allowed servers, further narrowed to its allowed tools. Every face asks this one object, so a rule
 * cannot be enforced on one surface and forgotten on another.
 */
export class Access {
  private readonly servers: Set<string> | undefined;
  private readonly tools: Set<string> | undefined;
  private view: string | undefined;

  private constructor(
    readonly kind: 'admin' | 'open' | 'key' | 'anonymous',
    readonly key?: KeyRecord,
    /**
     * Whose account an upstream with per-user grants acts as (src/mcp/upstream/oauth/): `user:<sub>` for a signed-in user (or a
     * user an `assert_user` key names), `key:<keyId>` for a key; undefined for the admin and open callers, who use the
     * server's shared grant, and for anonymous ones, who have none.
     */
    readonly subject?: string,
    /**
     * A signed-in user's token claims that policies read (policy.groupsClaim and policy.claims, src/policy): only
     * those, so one Access serves every token of the user that says the same about them.
     */
    readonly claims?: Readonly<Record<string, unknown>>,
  ) {
    this.servers = key?.allowedServers ? new Set(key.allowedServers) : undefined;
    this.tools = key?.allowedTools ? new Set(key.allowedTools) : undefined;
  }

  /** Holder of ADMIN_KEY. */
  static readonly admin = new Access('admin');
  /** Any caller of a service without ADMIN_KEY (which only listens on loopback). */
  static readonly open = new Access('open');
  /** A caller without a key let through to the chat proxy (chat.requireKey off): sees every tool, manages nothing. */
  static readonly anonymous = new Access('anonymous');

  /**
   * One Access per stored record (records are replaced, never changed in place): a key that sees half of 10,000 tools
   * would otherwise rebuild its name sets and view key on every request, which cost more than the search itself.
   */
  static forKey(key: KeyRecord): Access {
    let access = byRecord.get(key);
    if (!access) {
      access = new Access('key', key, `key:${key.keyId}`);
      byRecord.set(key, access);
    }
    return access;
  }

  /**
   * A signed-in user (src/auth/identity/principal.ts): `record` is made from a key template for them, and cached there
   * like stored records, so the derived sets are built once per user and template.
   */
  static forUser(record: KeyRecord, user: string, claims: Readonly<Record<string, unknown>> = {}): Access {
    let access = byRecord.get(record);
    if (!access) {
      access = new Access('key', record, `user:${user}`, claims);
      byRecord.set(record, access);
    }
    return access;
  }

  /** A key marked `assert_user` acting for one of its users (x-toolrouter-user): the key's scope, the user's grants. */
  asUser(user: string): Access {
    return new Access(this.kind, this.key, `user:${user}`);
  }

  /** A signed-in user (a token's subject), as opposed to a stored key or a key acting for a user. */
  get signedIn(): boolean {
    return this.claims !== undefined;
  }

  /** May manage keys, catalog sources, the index and settings. */
  get isAdmin(): boolean {
    return this.kind === 'admin' || this.kind === 'open';
  }

  /** Sees less than the whole catalog. */
  get restricted(): boolean {
    return this.servers !== undefined || this.tools !== undefined;
  }

  get searchEnabled(): boolean {
    return this.key?.toolSearchEnabled ?? true;
  }

  /** The key's own code mode setting (`code_mode_enabled`); undefined: the service's (mcp.codeMode). */
  get codeModeEnabled(): boolean | undefined {
    return this.key?.codeModeEnabled;
  }

  /** Separates what different keys teach the router (feedback); undefined for the admin and open callers. */
  get scope(): string | undefined {
    return this.key?.keyId;
  }

  /** What this caller may see, as a string: callers with equal views share caches keyed by it (visible sets, view hashes). */
  get viewKey(): string {
    // Computed once: the same string object on every request, so the caches keyed by it hash it once too.
    this.view ??= JSON.stringify([this.key?.allowedServers ?? null, this.key?.allowedTools ?? null]);
    return this.view;
  }

  /** An upstream tool belongs to its server; a static tool to its source. */
  canSee(entry: Pick<CatalogEntry, 'source' | 'server' | 'tool'>): boolean {
    if (this.servers && !this.servers.has(entry.server ?? entry.source)) return false;
    return !this.tools || this.tools.has(entry.tool.name);
  }

  canSeeServer(server: string): boolean {
    return !this.servers || this.servers.has(server);
  }

  /** For refusals: says what the key may use instead, without naming anything it may not. */
  describe(): string {
    const parts: string[] = [];
    if (this.key?.allowedServers) parts.push(`allowed servers: ${this.key.allowedServers.join(', ') || '(none)'}`);
    if (this.key?.allowedTools) parts.push(`allowed tools: ${this.key.allowedTools.join(', ') || '(none)'}`);
    return parts.length > 0 ? parts.join('; ') : 'all servers are allowed';
  }
}
