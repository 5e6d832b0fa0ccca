/**
 * Upstream connections of a per-user OAuth server (`auth: {type: oauth, perUser: true}`): one per subject, opened on
 * demand with that subject's grant, bounded per server (the least recently used idle one closes first) and closed
 * when idle. The server's shared connection (the admin's grant) lists the tools; each call goes out on its caller's.
 */
import { Client, UnauthorizedError } from '@modelcontextprotocol/client';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { currentRequestScope } from '../../auth/request-context.js';
import { describeUpstreamError } from './errors.js';
import { UrlElicitationRequiredError } from './oauth/elicitation.js';
import { OAUTH_CALLBACK_PATH, type UserAuth, type UserGrants } from './oauth/types.js';
import { CallRegistry } from '../relay/scope.js';
import { installRelayHandlers, RELAY_CAPABILITIES } from '../relay/upstream.js';
import { IMPLEMENTATION } from '../version.js';
import { DEFAULT_MAX_RESULT_BYTES } from './bounds.js';
import type { LogLevel } from '../relay/channel.js';
import { callAsTask, callFailure, callTool, runsAsTask, setUpstreamLogLevel } from './calls.js';
import { connectWithin } from './connect.js';
import { createTransport, terminateSession } from './transport.js';
import { UpstreamError, withTimeout, type RemoteServerConfig, type UpstreamCallOptions } from './types.js';

export interface UserConnectionsOptions {
  grants: UserGrants;
  /** Open connections per server at most. */
  max: number;
  /** Closed after this long without a call. */
  idleMs: number;
  connectTimeoutMs: number;
  /** Largest message read from the server (mcp.maxResultBytes), as on the shared connection. */
  maxResultBytes?: number;
  log: Logger;
}

interface Entry {
  client: Promise<Client>;
  auth: UserAuth;
  /**
   * This user's calls in flight: what the server asks or tells during one (elicitation, sampling, roots, log
   * messages) reaches that call's client, exactly as on the shared connection (src/mcp/relay/).
   */
  calls: CallRegistry;
  inFlight: number;
  lastUsed: number;
}

export class UserConnections {
  private readonly entries = new Map<string, Entry>();
  private readonly sweep: NodeJS.Timeout;
  /** The log level toolrouter's sessions want of upstreams (relay/levels.ts), as on the shared connection. */
  private logLevel: LogLevel | undefined;

  constructor(
    readonly server: string,
    private readonly config: RemoteServerConfig,
    private readonly options: UserConnectionsOptions,
  ) {
    this.sweep = setInterval(() => this.closeIdle(), Math.max(500, Math.min(options.idleMs / 2, 60_000)));
    this.sweep.unref();
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Calls `upstreamName` as `subject` (as a task upstream when the tool's `taskSupport` asks for it: calls.ts
   * runsAsTask); without their grant, throws UrlElicitationRequiredError (no call is sent).
   */
  async call(
    subject: string,
    upstreamName: string,
    args: Record<string, unknown> | undefined,
    options: UpstreamCallOptions,
    taskSupport?: 'required' | 'optional',
  ): Promise<CallToolResult> {
    const auth = this.options.grants.userAuth(this.server, subject);
    if (!auth) throw new UpstreamError('upstream_unavailable', `upstream MCP server "${this.server}" is not a per-user server`, 1, this.server);
    if (!(await auth.hasGrant())) throw await this.elicitation(subject, options.keyId);
    const entry = this.entryFor(subject, auth);
    entry.inFlight++;
    entry.lastUsed = Date.now();
    try {
      let client: Client;
      try {
        client = await entry.client;
      } catch (error) {
        this.forget(subject, entry);
        if (error instanceof UnauthorizedError || auth.needed()) throw await this.elicitation(subject, options.keyId);
        throw new UpstreamError('upstream_unavailable', `upstream MCP server "${this.server}" could not be reached as this user: ${describeUpstreamError(error)}`, 1, this.server);
      }
      try {
        const asTask = runsAsTask(client, taskSupport, options);
        return await entry.calls.run(options.relay?.channel, () => (asTask ? callAsTask : callTool)(client, upstreamName, args, options));
      } catch (error) {
        // The grant stopped working under the call (refused and not renewable): the user authorizes again.
        if (error instanceof UnauthorizedError || auth.needed()) {
          this.forget(subject, entry);
          throw await this.elicitation(subject, options.keyId);
        }
        throw callFailure(this.server, error, `"${upstreamName}"`, options, () => this.forget(subject, entry), describeUpstreamError);
      }
    } finally {
      entry.inFlight--;
      entry.lastUsed = Date.now();
    }
  }

  /** Tells every open user connection the log level the sessions want; connections made later get it at connect. */
  setLogLevel(level: LogLevel): void {
    this.logLevel = level;
    for (const entry of this.entries.values()) void entry.client.then((client) => this.applyLogLevel(client), () => {});
  }

  private applyLogLevel(client: Client): void {
    const level = this.logLevel;
    if (level === undefined) return;
    setUpstreamLogLevel(client, level, this.options.connectTimeoutMs).catch((error: unknown) =>
      this.options.log.debug({ err: error, level }, 'logging/setLevel not taken'),
    );
  }

  /** Closes a subject's connection (their grant was revoked). */
  async drop(subject: string): Promise<void> {
    const entry = this.entries.get(subject);
    if (entry) this.forget(subject, entry);
  }

  async close(): Promise<void> {
    clearInterval(this.sweep);
    const entries = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(entries.map((entry) => closeClient(entry.client)));
  }

  private entryFor(subject: string, auth: UserAuth): Entry {
    const existing = this.entries.get(subject);
    if (existing) {
      // Most recently used last: the first entry is the one to evict.
      this.entries.delete(subject);
      this.entries.set(subject, existing);
      return existing;
    }
    if (this.entries.size >= this.options.max) {
      const idle = [...this.entries].find(([, entry]) => entry.inFlight === 0);
      if (!idle) throw new UpstreamError('upstream_unavailable', `upstream MCP server "${this.server}" has ${this.options.max} user connections busy; retry later`, 1, this.server);
      this.forget(idle[0], idle[1]);
    }
    const calls = new CallRegistry(this.server);
    const entry: Entry = { client: this.connect(auth, calls), auth, calls, inFlight: 0, lastUsed: Date.now() };
    // A failed connect is handled by the call that awaits it; this keeps it from being an unhandled rejection meanwhile.
    entry.client.catch(() => {});
    this.entries.set(subject, entry);
    return entry;
  }

  private async connect(auth: UserAuth, calls: CallRegistry): Promise<Client> {
    // Declared and relayed as on the shared connection: a request this user's client cannot serve is refused per call.
    const client = new Client(IMPLEMENTATION, { capabilities: RELAY_CAPABILITIES, versionNegotiation: { mode: 'auto' } });
    installRelayHandlers(client, calls, this.options.log);
    // The server's passthroughHeaders apply here as on the shared connection, on top of the user's grant (config
    // refuses `authorization` among them for an OAuth server: that header is the grant's).
    const transport = createTransport(this.config, {
      authProvider: auth.provider,
      maxResultBytes: this.options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES,
      ...(this.config.passthroughHeaders ? { passthrough: { server: this.server, headers: this.config.passthroughHeaders } } : {}),
    });
    try {
      await connectWithin(client, transport, this.options.connectTimeoutMs);
    } catch (error) {
      await client.close().catch(() => {});
      throw error;
    }
    this.applyLogLevel(client);
    return client;
  }

  private forget(subject: string, entry: Entry): void {
    if (this.entries.get(subject) === entry) this.entries.delete(subject);
    void closeClient(entry.client);
  }

  private closeIdle(): void {
    const cutoff = Date.now() - this.options.idleMs;
    for (const [subject, entry] of this.entries) if (entry.inFlight === 0 && entry.lastUsed < cutoff) this.forget(subject, entry);
  }

  /** This subject's connect link (bound to them and the calling key, oauth/binding.ts), as the error the caller is answered with. */
  private async elicitation(subject: string, keyId: string | undefined): Promise<UrlElicitationRequiredError> {
    const origin = currentRequestScope()?.origin;
    try {
      const url = await this.options.grants.authorizeUser(this.server, subject, origin === undefined ? undefined : `${origin}${OAUTH_CALLBACK_PATH}`, keyId);
      return new UrlElicitationRequiredError(this.server, url);
    } catch (error) {
      this.options.log.warn({ upstream: this.server, err: error }, 'could not start a per-user authorization');
      throw new UpstreamError('upstream_unavailable', `upstream MCP server "${this.server}" needs your authorization, which cannot be started now: ${describeUpstreamError(error)}`, 5, this.server);
    }
  }
}

async function closeClient(pending: Promise<Client>): Promise<void> {
  const client = await pending.catch(() => undefined);
  if (!client) return;
  await withTimeout(terminateSession(client.transport), 1_000).catch(() => {});
  await client.close().catch(() => {});
}
