import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { RedisBus } from '../../../redis/bus.js';
import { bindingCookie, bindingMatches, connectUrl, cookieName, hashBinding, isStarter, isToken, randomToken, readCookie, type FlowStarter } from './binding.js';
import { Sealer } from './crypto.js';
import type { RevocationOutcome } from './revocation.js';
import { OAuthRequestError, ServerOAuth } from './server-oauth.js';
import type { OAuthSettings, UpstreamOAuthSettings } from './settings.js';
import { MemoryOAuthStore, RedisOAuthStore, type ConnectLink, type OAuthStore } from './store.js';
import type { Access } from '../../../auth/access.js';
import type { UpstreamAuth, UserGrants } from './types.js';

export interface OAuthManagerOptions {
  /** Upstream servers by name; those with `auth` (HTTP only) are OAuth servers. */
  servers: Record<string, { url: string; auth?: UpstreamOAuthSettings } | { command: string }>;
  settings: OAuthSettings;
  /** With Redis, grants are shared by every instance (sealed); without, they are this process's (and stateDir's). */
  bus?: RedisBus;
  stateDir?: string;
  log: Logger;
}

/** What the callback hands back to its route: which server was authorized, and for whom when it is per-user. */
export interface CallbackResult {
  server: string;
  subject?: string;
  /** The upstream server's address, and the account the authorization server named in its token answer, if it did. */
  upstreamUrl: string;
  account?: string;
}

/** What the connect page does once the browser proved it started the flow: set the cookie, go to the upstream. */
export interface ConnectPass {
  cookie: string;
  authorizationUrl: string;
}

/** A per-user server's grant as the admin lists it: whose, since when, and why it stopped working if it did. */
export interface UserGrant {
  subject: string;
  updatedAt: string;
  problem?: { reason: string; message: string };
}

/** Per-user grants' ServerOAuth objects kept (they hold no connection; the store has the grants). */
const MAX_USER_GRANTS_CACHED = 10_000;

/** The store key of a subject's grant: the server's name and a hash of the subject (no user id in a Redis key name). */
export function userRecordKey(server: string, subject: string): string {
  return `${userRecordPrefix(server)}${createHash('sha256').update(subject).digest('hex').slice(0, 32)}`;
}

function userRecordPrefix(server: string): string {
  // Server names never contain ':' (SERVER_NAME), so no server's key is another's prefix.
  return `${server}:user:`;
}

/**
 * The OAuth upstreams of this process: one ServerOAuth each, over one store. Without TOOLROUTER_SECRET_KEY where tokens
 * would be written somewhere (Redis, a state file), the OAuth servers are not started, each reporting why; servers
 * without `auth` are unaffected.
 */
export class OAuthManager implements UserGrants {
  private readonly servers = new Map<string, ServerOAuth>();
  /** Per-user servers' grants by store key (userRecordKey), made on demand. */
  private readonly users = new Map<string, ServerOAuth>();
  private readonly store: OAuthStore;
  /** Why OAuth servers are not started, when they are not. */
  private readonly refusal: string | undefined;

  constructor(private readonly options: OAuthManagerOptions) {
    const { settings, bus, stateDir, log } = options;
    const oauthServers = Object.entries(options.servers).flatMap(([name, config]) =>
      'url' in config && config.auth !== undefined ? [[name, { url: config.url, auth: config.auth }] as const] : [],
    );
    const sealer = settings.secretKey ? new Sealer(settings.secretKey) : undefined;
    const persistent = bus ? 'Redis' : stateDir ? `the state file in ${stateDir}` : undefined;
    if (persistent && !sealer) {
      this.refusal = `not started: OAuth tokens are kept in ${persistent}, encrypted with TOOLROUTER_SECRET_KEY, which is not set (set it to a random string of 16+ characters, the same on every instance)`;
      if (oauthServers.length > 0) log.error({ servers: oauthServers.map(([name]) => name) }, `OAuth upstream servers ${this.refusal}`);
    }
    this.store = bus && sealer ? new RedisOAuthStore(bus, sealer, log) : new MemoryOAuthStore({ ...(stateDir && sealer ? { stateDir } : {}), sealer, log });
    for (const [server, config] of oauthServers) this.add(server, config);
  }

  /**
   * Adds (or replaces) an OAuth server: for servers added at run time, before their upstream connection is created
   * (the connection asks `auth(name)` once). A grant stored for the same URL is used again.
   */
  add(server: string, config: { url: string; auth: UpstreamOAuthSettings }): void {
    const { settings, log } = this.options;
    this.servers.set(
      server,
      new ServerOAuth({
        server,
        url: config.url,
        settings: config.auth,
        store: this.store,
        lockTtlMs: settings.lockTtlMs,
        pendingTtlMs: settings.pendingTtlMs,
        revocationTimeoutMs: settings.revocationTimeoutMs,
        ...(settings.callbackUrl ? { callbackUrl: settings.callbackUrl } : {}),
        ...(settings.clientMetadataUrl ? { clientMetadataUrl: settings.clientMetadataUrl } : {}),
        ...(this.refusal ? { refusal: this.refusal } : {}),
        log: log.child({ component: 'oauth' }),
      }),
    );
  }

  /** A server removed at run time. Its stored grant stays (a server put back under the same name and URL reuses it). */
  remove(server: string): void {
    this.servers.delete(server);
    for (const [key, oauth] of this.users) if (oauth.name === server) this.users.delete(key);
  }

  /** Whether a server keeps one grant per subject (`auth: {type: oauth, perUser: true}`). */
  perUser(server: string): boolean {
    return this.servers.get(server)?.options.settings.perUser === true;
  }

  /** The OAuth side of a per-user server acting as `subject`; undefined when the server is not per-user. */
  userAuth(server: string, subject: string): ServerOAuth | undefined {
    const shared = this.servers.get(server);
    if (!shared || shared.options.settings.perUser !== true) return undefined;
    const key = userRecordKey(server, subject);
    let oauth = this.users.get(key);
    if (oauth && oauth.options.url !== shared.options.url) oauth = undefined;
    if (oauth) {
      this.users.delete(key);
    } else {
      oauth = new ServerOAuth({ ...shared.options, subject, storeKey: key, sharedClient: async () => (await shared.record())?.client });
      if (this.users.size >= MAX_USER_GRANTS_CACHED) this.users.delete(this.users.keys().next().value!);
    }
    this.users.set(key, oauth);
    return oauth;
  }

  /**
   * A subject's authorization URL for a per-user server: the browser step that gives their calls their own grant.
   * `callbackUrl`: mcp.oauth.callbackUrl wins; else the address the caller reached toolrouter at.
   */
  async authorizeUser(server: string, subject: string, callbackUrl: string | undefined, keyId?: string): Promise<string> {
    const oauth = this.userAuth(server, subject);
    if (!oauth) throw new OAuthRequestError('not_found', `no upstream MCP server "${server}" with per-user OAuth (auth: {type: oauth, perUser: true}) is configured`);
    const callback = this.options.settings.callbackUrl ?? callbackUrl;
    if (!callback) throw new OAuthRequestError('conflict', 'per-user authorization needs mcp.oauth.callbackUrl (the browser\'s way back to toolrouter)');
    return this.startFlow(oauth, callback, { subject, ...(keyId !== undefined ? { keyId } : {}) });
  }

  /**
   * Starts a flow and hands out toolrouter's connect link for it, never the authorization server's URL: the browser
   * that opens the link must first show it is the starter (binding.ts), so a forwarded link cannot be completed by
   * someone else's browser and account.
   */
  private async startFlow(oauth: ServerOAuth, callbackUrl: string, starter: FlowStarter): Promise<string> {
    const binding = randomToken();
    const { authorizationUrl, state, redirectUrl } = await oauth.authorize(callbackUrl, hashBinding(binding));
    const flowId = randomToken();
    const ttlMs = this.options.settings.pendingTtlMs;
    const link: ConnectLink = { state, server: oauth.name, ...starter, authorizationUrl, binding, redirectUrl, expiresAt: Date.now() + ttlMs };
    await this.store.putConnect(flowId, link, ttlMs);
    return connectUrl(redirectUrl, flowId);
  }

  /** The connect page: which flow a link is, without using it (undefined: unknown, used or expired). */
  async connectLink(flowId: string): Promise<Pick<ConnectLink, 'server' | 'subject'> | undefined> {
    if (!isToken(flowId)) return undefined;
    const link = await this.store.readConnect(flowId);
    return link && { server: link.server, ...(link.subject !== undefined ? { subject: link.subject } : {}) };
  }

  /**
   * The browser showed who it is (`access`; undefined on an open service, one local user): when that is the flow's
   * starter, the link is used up and the browser gets the binding cookie and the authorization server's URL.
   */
  async connect(flowId: string, access: Access | undefined): Promise<ConnectPass> {
    const unknown = new OAuthRequestError('not_found', 'unknown, used or expired authorization link: start again (POST /v1/mcp/servers/:name/authorize, or call the tool again)');
    if (!isToken(flowId)) throw unknown;
    const peek = await this.store.readConnect(flowId);
    if (!peek) throw unknown;
    if (access !== undefined && !isStarter(access, peek)) {
      this.options.log.warn({ upstream: peek.server, perUser: peek.subject !== undefined }, 'an authorization link was opened with a credential that did not start it (a forwarded link?); refused');
      throw new OAuthRequestError('forbidden', 'this credential did not start this authorization: only the key or user that started it can complete it (a forwarded link cannot be used)');
    }
    // Taken only now, and atomically: two browsers racing with the right key still make one pass.
    const link = await this.store.takeConnect(flowId);
    if (!link) throw unknown;
    return { cookie: bindingCookie(link.state, link.binding, link.redirectUrl, Math.max(1_000, link.expiresAt - Date.now())), authorizationUrl: link.authorizationUrl };
  }

  /** The grants of a per-user server, subjects named (admin). */
  async userGrants(server: string): Promise<UserGrant[]> {
    if (!this.perUser(server)) throw new OAuthRequestError('not_found', `no upstream MCP server "${server}" with per-user OAuth is configured`);
    const url = this.servers.get(server)!.options.url;
    const records = await this.store.list(userRecordPrefix(server));
    return [...records.values()]
      // Only grants: a subject that started an authorization and never came back holds no tokens.
      .filter((record) => record.subject !== undefined && record.url === url && record.tokens !== undefined)
      .map((record) => ({ subject: record.subject!, updatedAt: record.updatedAt, ...(record.problem ? { problem: { reason: record.problem.reason, message: record.problem.message } } : {}) }))
      .sort((a, b) => a.subject.localeCompare(b.subject));
  }

  /**
   * Drops a subject's grant on a per-user server (`revoked`: false when there was none to drop), then revokes its tokens
   * at the authorization server where it can (`upstream`, see revocation.ts).
   */
  async revokeUser(server: string, subject: string, by: string): Promise<{ revoked: boolean; upstream: RevocationOutcome }> {
    const oauth = this.userAuth(server, subject);
    if (!oauth) throw new OAuthRequestError('not_found', `no upstream MCP server "${server}" with per-user OAuth is configured`);
    const { had, upstream } = await oauth.revoke(by);
    this.options.log.info({ upstream: server, by, upstreamRevocation: upstream }, 'per-user OAuth grant revoked');
    return { revoked: had, upstream };
  }

  get storeKind(): OAuthStore['kind'] {
    return this.store.kind;
  }

  /** For the upstream manager (`auth` option): the OAuth side of an HTTP server, if it has `auth: oauth`. */
  auth(server: string): UpstreamAuth | undefined {
    return this.servers.get(server);
  }

  has(server: string): boolean {
    return this.servers.has(server);
  }

  /**
   * Follows changes to grants made by any instance (an authorize completed elsewhere, a refresh): `onAuthorized` is
   * called for the server whose record changed (undefined: every one, after a Redis reconnect).
   */
  async start(onChanged: (server: string | undefined) => void): Promise<void> {
    await this.store.listen(
      (server) => {
        for (const oauth of this.servers.values()) if (server === undefined || oauth.name === server) oauth.changed();
        for (const oauth of this.users.values()) if (server === undefined || oauth.key === server) oauth.changed();
        onChanged(server);
      },
      async () => {
        for (const oauth of this.servers.values()) await oauth.restore();
      },
    );
  }

  /**
   * This service's client ID metadata document (draft-ietf-oauth-client-id-metadata-document), when
   * `mcp.oauth.clientMetadataUrl` is set: a public client using PKCE, redirected to `callbackUrl`.
   */
  clientMetadataDocument(): Record<string, unknown> | undefined {
    const { clientMetadataUrl, callbackUrl } = this.options.settings;
    if (!clientMetadataUrl || !callbackUrl) return undefined;
    return {
      client_id: clientMetadataUrl,
      client_name: 'toolrouter',
      redirect_uris: [callbackUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  /** Admin: the authorization URL for the browser. `callbackUrl`: this service as the admin reached it + /oauth/callback. */
  async authorize(server: string, callbackUrl: string, keyId?: string): Promise<string> {
    const oauth = this.servers.get(server);
    if (!oauth) throw new OAuthRequestError('not_found', `no upstream MCP server "${server}" with auth: oauth is configured`);
    return this.startFlow(oauth, callbackUrl, keyId !== undefined ? { keyId } : {});
  }

  /** The browser's return: `state` names the pending authorize; `code` (or `error`) is the authorization server's answer. */
  async callback(
    query: { state?: string; code?: string; error?: string; error_description?: string; iss?: string },
    cookieHeader: string | undefined,
  ): Promise<CallbackResult> {
    if (!query.state) throw new OAuthRequestError('invalid_request', 'the callback has no state parameter');
    const pending = await this.store.takePending(query.state);
    if (!pending) throw new OAuthRequestError('invalid_request', 'unknown or expired authorization (state): start again with POST /v1/mcp/servers/:name/authorize');
    // Taken (single use) before this check: a browser that did not pass the connect page spends the flow, it does not
    // leave it for another try. Its starter starts again; nobody gets a grant from this browser's account.
    if (!bindingMatches(readCookie(cookieHeader, cookieName(query.state)), pending.binding)) {
      this.options.log.warn({ upstream: pending.server, perUser: pending.subject !== undefined }, 'an authorization came back in a browser that did not open its link (a forwarded link?); refused');
      throw new OAuthRequestError(
        'forbidden',
        `this browser did not open the authorization link toolrouter handed out (…/oauth/connect/…), so it cannot complete the authorization of "${pending.server}": nothing was linked. The person who started it opens their link again (start over).`,
      );
    }
    const oauth = pending.subject === undefined ? this.servers.get(pending.server) : this.userAuth(pending.server, pending.subject);
    if (!oauth) throw new OAuthRequestError('not_found', `upstream MCP server "${pending.server}" is no longer configured with auth: oauth`);
    if (query.error) {
      const detail = query.error_description ? `${query.error}: ${query.error_description.slice(0, 300)}` : query.error;
      throw new OAuthRequestError('invalid_request', `the authorization server refused the authorization of "${pending.server}" (${detail})`);
    }
    if (!query.code) throw new OAuthRequestError('invalid_request', 'the callback has neither code nor error');
    await oauth.complete(pending, query.code, query.iss);
    this.options.log.info({ upstream: pending.server, perUser: pending.subject !== undefined }, 'upstream OAuth server authorized');
    const account = accountOf((await oauth.record().catch(() => undefined))?.tokens);
    return {
      server: pending.server,
      upstreamUrl: pending.url,
      ...(pending.subject !== undefined ? { subject: pending.subject } : {}),
      ...(account !== undefined ? { account } : {}),
    };
  }
}

/**
 * The upstream account a token answer names, for the callback page only (never for a decision): an OpenID `id_token`'s
 * preferred_username, email or sub. Its payload is read, not verified: the page shows what the server said, and the SDK
 * keeps no other field of the answer that could name the account.
 */
function accountOf(tokens: { id_token?: string } | undefined): string | undefined {
  if (typeof tokens?.id_token !== 'string') return undefined;
  let claims: Record<string, unknown>;
  try {
    claims = JSON.parse(Buffer.from(tokens.id_token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  for (const value of [claims.preferred_username, claims.email, claims.sub]) {
    if (typeof value === 'string' && value !== '') return value.slice(0, 200);
  }
  return undefined;
}
