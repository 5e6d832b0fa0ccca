import { randomBytes } from 'node:crypto';
import {
  auth,
  extractWWWAuthenticateParams,
  UnauthorizedError,
  type AuthProvider,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
} from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { ToolrouterError } from '../../../errors.js';
import { revokeAtAuthorizationServer, type RevocationOutcome } from './revocation.js';
import type { UpstreamOAuthSettings } from './settings.js';
import type { NeedsAuthorizationReason, OAuthRecord, OAuthStore, PendingAuthorization } from './store.js';
import type { AuthorizationNeeded, UpstreamAuth } from './types.js';

type UnauthorizedContext = Parameters<NonNullable<AuthProvider['onUnauthorized']>>[0];

export interface ServerOAuthOptions {
  server: string;
  url: string;
  settings: UpstreamOAuthSettings;
  store: OAuthStore;
  lockTtlMs: number;
  pendingTtlMs: number;
  /** The configured callback URL (mcp.oauth.callbackUrl), if any. */
  callbackUrl?: string;
  /** Where this service's client ID metadata document is served (mcp.oauth.clientMetadataUrl), if anywhere. */
  clientMetadataUrl?: string;
  /** How long a revoke waits for the authorization server's revocation endpoint (mcp.oauth.revocationTimeoutMs). */
  revocationTimeoutMs?: number;
  /** Set when this server must not start (why: e.g. no TOOLROUTER_SECRET_KEY for tokens stored in Redis). */
  refusal?: string;
  /** A per-user server's grant for one subject (Access.subject), stored under `storeKey` instead of the server's name. */
  subject?: string;
  storeKey?: string;
  /** For a subject's grant: the client the server's shared record registered, used until the subject has its own. */
  sharedClient?: () => Promise<StoredOAuthClientInformation | undefined>;
  log: Logger;
}

/**
 * Thrown for an admin request that cannot be done (unknown state, a server that needs no browser step...): no such
 * server (404), not possible in its state (409), a callback that is not a valid answer (400), or a browser that is not
 * the flow's starter (403, src/mcp/upstream/oauth/binding.ts).
 */
export class OAuthRequestError extends ToolrouterError {
  override readonly name = 'OAuthRequestError';
  declare readonly code: 'not_found' | 'conflict' | 'invalid_request' | 'forbidden';
  constructor(code: 'not_found' | 'conflict' | 'invalid_request' | 'forbidden', message: string) {
    super(code, message);
  }
}

const DEFAULT_REVOCATION_TIMEOUT_MS = 3_000;

/** Redirect URI used only to give a registered client's metadata one, before any authorize named the real one. */
const PLACEHOLDER_CALLBACK = 'http://127.0.0.1/oauth/callback';

/**
 * The OAuth side of one upstream HTTP server: its grant in the store, the transport's bearer token, refresh on a 401
 * (under the store's lock, see store.ts), and the admin's authorize → callback. The OAuth protocol itself (discovery,
 * registration, PKCE, token requests) is the SDK's `auth()`, driven through an OAuthClientProvider per flow.
 */
export class ServerOAuth implements UpstreamAuth {
  readonly provider: AuthProvider;
  private problem: AuthorizationNeeded | undefined;
  /** The access token the transport last sent: a 401 for it, with the same token in the store, means refresh. */
  private lastSent: string | undefined;
  /** The record as last read, used while the store cannot be read (Redis outage) so calls keep their token. */
  private lastKnown: OAuthRecord | undefined;

  constructor(readonly options: ServerOAuthOptions) {
    this.provider = {
      token: () => this.token(),
      onUnauthorized: (ctx) => this.onUnauthorized(ctx),
    };
  }

  get name(): string {
    return this.options.server;
  }

  /** Where its record is stored: the server's name, or a per-user key (src/mcp/upstream/oauth/manager.ts). */
  get key(): string {
    return this.options.storeKey ?? this.options.server;
  }

  get subject(): string | undefined {
    return this.options.subject;
  }

  /** Whether a grant is stored that the next request can use (tokens, no recorded problem). */
  async hasGrant(): Promise<boolean> {
    const record = await this.record().catch(() => this.lastKnown);
    return record?.tokens?.access_token !== undefined && record.problem === undefined;
  }

  /**
   * A subject (or the admin) gives up this grant: tokens and client dropped, the record kept as a tombstone so that no
   * instance puts the grant back as if the store had lost it. Then, the grant being gone here already, its tokens are
   * revoked at the authorization server (RFC 7009) when it advertises a revocation endpoint: best effort, within
   * `revocationTimeoutMs`, so the caller's answer waits that long at most.
   */
  async revoke(by: string): Promise<{ had: boolean; upstream: RevocationOutcome }> {
    const had = await this.hasGrant();
    let dropped: OAuthRecord | undefined;
    await this.options.store.withLock(this.key, this.options.lockTtlMs, () =>
      this.update((record) => {
        dropped = structuredClone(record);
        delete record.tokens;
        delete record.discovery;
        record.problem = { reason: 'revoked', message: `revoked by ${by}`, at: new Date().toISOString() };
      }),
    );
    this.problem = { reason: 'revoked', message: `revoked by ${by}` };
    await this.options.store.announce(this.key).catch(() => {});
    const upstream = dropped?.tokens
      ? await revokeAtAuthorizationServer({
          url: this.options.url,
          record: dropped,
          client: await this.client(dropped).catch(() => undefined),
          timeoutMs: this.options.revocationTimeoutMs ?? DEFAULT_REVOCATION_TIMEOUT_MS,
          log: this.options.log.child({ upstream: this.name }),
        })
      : 'none';
    return { had, upstream };
  }

  /** The client a record's tokens were issued to: the configured one, the record's, or the server's shared one. */
  private async client(record: OAuthRecord): Promise<StoredOAuthClientInformation | undefined> {
    const { clientId, clientSecret } = this.options.settings;
    if (clientId) return { client_id: clientId, ...(clientSecret ? { client_secret: clientSecret } : {}), ...(record.client?.issuer ? { issuer: record.client.issuer } : {}) };
    return record.client ?? (await this.options.sharedClient?.());
  }

  get grant(): UpstreamOAuthSettings['grant'] {
    return this.options.settings.grant;
  }

  needed(): AuthorizationNeeded | undefined {
    return this.problem;
  }

  refusal(): string | undefined {
    return this.options.refusal;
  }

  /** Another instance (or this one) changed the record: forget a cached verdict; the next attempt re-reads. */
  changed(): void {
    this.problem = undefined;
  }

  /** Puts the last record read back into a store that lost it (Redis restarted empty). */
  async restore(): Promise<void> {
    if (this.lastKnown && (await this.options.store.writeIfAbsent(this.key, this.lastKnown))) {
      this.options.log.info({ upstream: this.name }, 'OAuth grant put back into Redis after it lost its data');
    }
  }

  /** The stored record of this server, if it is for the configured URL. */
  async record(): Promise<OAuthRecord | undefined> {
    let record = await this.options.store.read(this.key);
    if (record === undefined && this.lastKnown !== undefined) {
      // Nothing deletes a record, so one gone means the store lost its data (Redis restarted empty): put back what this
      // instance last read (unless another instance was first), before any request goes out without a token.
      await this.options.store.writeIfAbsent(this.key, this.lastKnown);
      record = await this.options.store.read(this.key);
    }
    const current = record?.url === this.options.url ? record : undefined;
    if (current) this.lastKnown = current;
    return current;
  }

  async update(change: (record: OAuthRecord) => void): Promise<void> {
    const record = (await this.record()) ?? { url: this.options.url, updatedAt: new Date().toISOString() };
    change(record);
    if (this.options.subject !== undefined) record.subject = this.options.subject;
    record.updatedAt = new Date().toISOString();
    await this.options.store.write(this.key, record);
    this.lastKnown = record;
  }

  /** Marks the grant unusable (in the store too, so every instance gives the same reason) and returns the error to throw. */
  async fail(reason: NeedsAuthorizationReason, message: string, dropTokens = false): Promise<UnauthorizedError> {
    this.problem = { reason, message };
    await this.update((record) => {
      if (dropTokens) delete record.tokens;
      record.problem = { reason, message, at: new Date().toISOString() };
    }).catch((error: unknown) => this.options.log.warn({ err: error, upstream: this.name }, 'could not record why the OAuth grant stopped working'));
    return new UnauthorizedError(message);
  }

  private async token(): Promise<string | undefined> {
    if (this.options.refusal) throw new Error(this.options.refusal);
    let record: OAuthRecord | undefined;
    try {
      record = await this.record();
    } catch (error) {
      this.options.log.debug({ err: error, upstream: this.name }, 'OAuth store unreadable; using the last token read');
      record = this.lastKnown;
    }
    this.lastSent = record?.tokens?.access_token;
    return this.lastSent;
  }

  /** A 401: refresh (or, for client_credentials, fetch a new token), once across instances; or give up to the admin. */
  private async onUnauthorized(ctx: UnauthorizedContext): Promise<void> {
    if (this.options.refusal) throw new Error(this.options.refusal);
    const refused = this.lastSent;
    this.problem = undefined;
    try {
      await this.options.store.withLock(this.key, this.options.lockTtlMs, async () => {
        const record = await this.record();
        // Someone refreshed since that token was sent: retry with theirs rather than spend the refresh token again.
        if (record?.tokens?.access_token !== undefined && record.tokens.access_token !== refused) return;
        if (this.grant === 'authorization_code') {
          if (!record?.tokens) {
            throw await this.fail(
              record?.problem?.reason ?? 'never_connected',
              record?.problem?.message ?? `not authorized yet: an admin connects it with POST /v1/mcp/servers/${this.name}/authorize and a browser visit`,
            );
          }
          if (!record.tokens.refresh_token) {
            throw await this.fail('revoked', 'the server refused the access token and there is no refresh token to get another', true);
          }
        }
        const { resourceMetadataUrl } = extractWWWAuthenticateParams(ctx.response);
        const flow = new Flow(this, { kind: 'background' }, record?.redirectUrl ?? this.options.callbackUrl ?? PLACEHOLDER_CALLBACK);
        const result = await auth(flow, { serverUrl: this.options.url, resourceMetadataUrl, scope: this.options.settings.scope, fetchFn: ctx.fetchFn });
        if (result !== 'AUTHORIZED') throw new UnauthorizedError(this.problem?.message ?? 'the server needs a new authorization');
        this.options.log.info({ upstream: this.name, grant: this.grant }, 'upstream OAuth tokens renewed');
      });
    } catch (error) {
      if (!this.problem) this.problem = { reason: 'refresh_failed', message: `renewing the access token failed: ${describe(error)}` };
      this.options.log.warn({ upstream: this.name, reason: this.problem.reason, message: this.problem.message }, 'upstream OAuth grant needs attention');
      throw error instanceof UnauthorizedError ? error : new UnauthorizedError(this.problem.message);
    }
  }

  /** Drops what discovery found (admin reconnect, a new authorize): the next OAuth step asks the server again. */
  async forgetDiscovery(): Promise<void> {
    const record = await this.record();
    if (record?.discovery === undefined) return;
    await this.update((stored) => {
      delete stored.discovery;
    });
  }

  /**
   * Starts the browser step: the authorization server's URL and the flow's `state`. `binding`: the hash of the browser
   * binding the callback will require (src/mcp/upstream/oauth/binding.ts).
   */
  async authorize(callbackUrl: string, binding: string): Promise<{ authorizationUrl: string; state: string; redirectUrl: string }> {
    if (this.options.refusal) throw new OAuthRequestError('conflict', this.options.refusal);
    if (this.grant === 'client_credentials') {
      throw new OAuthRequestError('conflict', `server "${this.name}" uses the client_credentials grant: toolrouter obtains its tokens itself, there is no browser step`);
    }
    const redirectUrl = this.options.callbackUrl ?? callbackUrl;
    const state = randomBytes(32).toString('base64url');
    const flow = new Flow(this, { kind: 'authorize', state }, redirectUrl);
    await this.options.store.withLock(this.key, this.options.lockTtlMs, async () => {
      // The admin starts over: where the authorization server is gets asked again, not read from an earlier answer.
      await this.forgetDiscovery();
      // Always the browser: the admin may be switching accounts or widening scope, so a refresh token is not reused.
      const result = await auth(flow, { serverUrl: this.options.url, scope: this.options.settings.scope, forceReauthorization: true });
      if (result !== 'REDIRECT' || !flow.authorizationUrl || !flow.verifier) throw new Error('the authorization server did not start a browser authorization');
    });
    const pending: PendingAuthorization = {
      server: this.name,
      ...(this.options.subject !== undefined ? { subject: this.options.subject } : {}),
      url: this.options.url,
      verifier: flow.verifier!,
      redirectUrl,
      createdAt: new Date().toISOString(),
      binding,
    };
    await this.options.store.putPending(state, pending, this.options.pendingTtlMs);
    return { authorizationUrl: flow.authorizationUrl!.href, state, redirectUrl };
  }

  /** The browser came back with a code: exchange it (PKCE verifier of the pending authorize) and store the tokens. */
  async complete(pending: PendingAuthorization, code: string, iss: string | undefined): Promise<void> {
    if (pending.url !== this.options.url) throw new OAuthRequestError('conflict', `server "${this.name}" changed its URL since this authorization started; authorize again`);
    const flow = new Flow(this, { kind: 'callback', verifier: pending.verifier }, pending.redirectUrl);
    await this.options.store.withLock(this.key, this.options.lockTtlMs, async () => {
      const result = await auth(flow, { serverUrl: this.options.url, authorizationCode: code, iss, scope: this.options.settings.scope });
      if (result !== 'AUTHORIZED') throw new Error('the authorization server did not issue tokens');
    });
    this.problem = undefined;
    await this.options.store.announce(this.key).catch(() => {});
  }
}

type FlowMode = { kind: 'background' } | { kind: 'authorize'; state: string } | { kind: 'callback'; verifier: string };

/**
 * The SDK's OAuthClientProvider for one run of `auth()`: what it reads and saves goes to the server's record. A
 * background run (a 401 on a live connection) never starts a browser step: reaching that point means the admin must.
 */
class Flow implements OAuthClientProvider {
  /** The SDK uses it as the client ID where the authorization server takes metadata documents (and no client is configured). */
  readonly clientMetadataUrl: string | undefined;
  authorizationUrl: URL | undefined;
  verifier: string | undefined;
  /** Set when the authorization server refused the refresh token during this run (invalid_grant). */
  private revoked = false;

  constructor(
    private readonly owner: ServerOAuth,
    private readonly mode: FlowMode,
    private readonly callbackUrl: string,
  ) {
    if (mode.kind === 'callback') this.verifier = mode.verifier;
    const { settings, clientMetadataUrl } = owner.options;
    this.clientMetadataUrl = settings.grant === 'authorization_code' && !settings.clientId ? clientMetadataUrl : undefined;
  }

  get redirectUrl(): string | undefined {
    // No redirect URL tells the SDK the flow is non-interactive (client_credentials).
    return this.owner.grant === 'client_credentials' ? undefined : this.callbackUrl;
  }

  get clientMetadata(): OAuthClientMetadata {
    const settings = this.owner.options.settings;
    const credentials = settings.grant === 'client_credentials';
    return {
      client_name: 'toolrouter',
      redirect_uris: credentials ? [] : [this.callbackUrl],
      grant_types: credentials ? ['client_credentials'] : ['authorization_code', 'refresh_token'],
      response_types: credentials ? [] : ['code'],
      // A confidential client when it has (or, registering, will get) a secret; else a public client with PKCE.
      token_endpoint_auth_method: credentials || settings.clientSecret ? 'client_secret_post' : 'none',
      ...(settings.scope ? { scope: settings.scope } : {}),
    };
  }

  state(): string {
    return this.mode.kind === 'authorize' ? this.mode.state : randomBytes(32).toString('base64url');
  }

  async clientInformation(): Promise<StoredOAuthClientInformation | undefined> {
    const { clientId, clientSecret } = this.owner.options.settings;
    // A subject's grant uses the client already registered for the server: one registration, not one per user.
    const client = (await this.owner.record())?.client ?? (await this.owner.options.sharedClient?.().catch(() => undefined));
    if (clientId) {
      // The configured client, bound to the authorization server it was first used with (the SDK's issuer stamp), so
      // its secret is never sent to another one should the server's metadata change.
      const issuer = client?.client_id === clientId ? client.issuer : undefined;
      return { client_id: clientId, ...(clientSecret ? { client_secret: clientSecret } : {}), ...(issuer ? { issuer } : {}) };
    }
    // Registered for another callback URL (toolrouter moved): register again rather than be refused at redirect.
    const registered = client && 'redirect_uris' in client ? (client.redirect_uris as string[]) : undefined;
    if (registered && this.redirectUrl !== undefined && !registered.includes(this.redirectUrl)) return undefined;
    return client;
  }

  async saveClientInformation(client: StoredOAuthClientInformation): Promise<void> {
    // Of a configured client only its ID and issuer stamp are kept: its secret stays in the configuration.
    const configured = this.owner.options.settings.clientId;
    await this.owner.update((record) => {
      record.client = configured ? { client_id: configured, ...(client.issuer ? { issuer: client.issuer } : {}) } : client;
    });
  }

  async tokens(): Promise<StoredOAuthTokens | undefined> {
    return (await this.owner.record())?.tokens;
  }

  async saveTokens(tokens: StoredOAuthTokens): Promise<void> {
    await this.owner.update((record) => {
      record.tokens = tokens;
      if (this.redirectUrl !== undefined) record.redirectUrl = this.redirectUrl;
      delete record.problem;
    });
    this.owner.changed();
  }

  async redirectToAuthorization(url: URL): Promise<void> {
    if (this.mode.kind === 'authorize') {
      this.authorizationUrl = url;
      return;
    }
    // A background run got here: the refresh token was refused or could not be used. Only the admin can fix it now.
    const tokens = (await this.owner.record())?.tokens;
    if (this.revoked) await this.owner.fail('revoked', 'the authorization server refused the refresh token (revoked or expired): authorize again');
    else if (tokens?.refresh_token) await this.owner.fail('refresh_failed', 'the authorization server did not renew the access token; retrying, or authorize again');
    else await this.owner.fail('never_connected', `not authorized yet: an admin connects it with POST /v1/mcp/servers/${this.owner.name}/authorize and a browser visit`);
  }

  saveCodeVerifier(verifier: string): void {
    // Only the admin's authorize keeps one: a background run must not replace the verifier of a browser step under way.
    if (this.mode.kind === 'authorize') this.verifier = verifier;
  }

  codeVerifier(): string {
    if (this.verifier === undefined) throw new Error('no PKCE verifier: this is not the callback of an authorization');
    return this.verifier;
  }

  async invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): Promise<void> {
    if (scope === 'verifier') return;
    if (scope === 'tokens' || scope === 'all') this.revoked = true;
    await this.owner.update((record) => {
      if (scope === 'all' || scope === 'client') delete record.client;
      if (scope === 'all' || scope === 'tokens') delete record.tokens;
      if (scope === 'all' || scope === 'discovery') delete record.discovery;
    });
  }

  async saveDiscoveryState(state: OAuthDiscoveryState): Promise<void> {
    await this.owner.update((record) => {
      record.discovery = state;
    });
  }

  async discoveryState(): Promise<OAuthDiscoveryState | undefined> {
    const discovery = (await this.owner.record())?.discovery;
    // Without protected resource metadata the authorization server was a guess (the MCP server's origin, the SDK's
    // fallback when the metadata fetch failed): not a fact to keep. Only the callback of the authorize that guessed
    // reads it back, since the SDK binds the code exchange to the server the browser was sent to.
    if (discovery && !discovery.resourceMetadata && this.mode.kind !== 'callback') return undefined;
    return discovery;
  }

  prepareTokenRequest(scope?: string): URLSearchParams | undefined {
    if (this.owner.grant !== 'client_credentials') return undefined;
    return new URLSearchParams({ grant_type: 'client_credentials', ...(scope ? { scope } : {}) });
  }
}

/** An error as one line, without anything that could be a credential (the SDK's messages carry none; bodies are cut). */
function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > 300 ? `${message.slice(0, 300)}…` : message;
}
