/**
 * One upstream server's connection: connecting and negotiating a revision (transport.ts makes the transport), keeping
 * its tools in the catalog (listing.ts), forwarding calls (calls.ts), and reconnecting with backoff when it goes away
 * (reconnection.ts).
 */
import { Client, type McpSubscription } from '@modelcontextprotocol/client';
import { EmptyResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Catalog } from '../../catalog/catalog.js';
import { describeConnectFailure, describeUpstreamError, readableLine, type HttpFailure } from './errors.js';
import { listFeatures, NO_FEATURES, type UpstreamFeatures } from './features.js';
import { mapArguments, type ToolTransform } from './transform.js';
import { IMPLEMENTATION } from '../version.js';
import { CallRegistry } from '../relay/scope.js';
import { installRelayHandlers, RELAY_CAPABILITIES } from '../relay/upstream.js';
import type { LogLevel } from '../relay/channel.js';
import { callAsTask, callFailure, callTool, forward, runsAsTask, setUpstreamLogLevel } from './calls.js';
import { listAllTools, ToolListing } from './listing.js';
import { needsPerson, Reconnection } from './reconnection.js';
import type { AuthorizationNeeded, UpstreamAuth } from './oauth/types.js';
import type { Transport } from '@modelcontextprotocol/client';
import { createTransport, terminateSession } from './transport.js';
import {
  transportKind,
  UpstreamError,
  withTimeout,
  type FeaturesChange,
  type UpstreamCallOptions,
  type UpstreamOrigin,
  type UpstreamServerConfig,
  type UpstreamState,
  type UpstreamStatus,
} from './types.js';
import { connectWithin } from './connect.js';

/** Lines of a stdio server's stderr kept per connection attempt, for the error that explains a failed start. */
const STDERR_TAIL_LINES = 20;
/** Of those, how many go into the one-line error (the rest are in the debug log). */
const STDERR_IN_ERROR = 3;

export interface ConnectionOptions {
  separator: string;
  reconnect: { initialMs: number; maxMs: number };
  connectTimeoutMs: number;
  pingIntervalMs: number;
  /** This server's transforms by qualified upstream name. */
  transforms: Map<string, ToolTransform>;
  log: Logger;
  /** OAuth for an HTTP server with `auth: oauth` (src/mcp/upstream/oauth/). */
  auth?: UpstreamAuth | undefined;
  /** Largest message (a result) read from this server; larger ones are refused unread (upstream/bounds.ts). */
  maxResultBytes: number;
}

export class UpstreamConnection {
  private features: UpstreamFeatures = NO_FEATURES;
  /** Resource URI → how many of our sessions subscribed to it (one upstream subscription each). */
  private readonly subscriptions = new Map<string, number>();
  /** The last non-2xx HTTP response of this upstream; its status line and WWW-Authenticate go into the error. */
  private lastHttpFailure: HttpFailure | undefined;
  /** The transport's last error: the real cause when the SDK then reports only "connection closed". */
  private lastTransportError: unknown;
  private state: UpstreamState = 'down';
  private client: Client | undefined;
  /**
   * The current client's transport, closed here as well as by the client: while the client is still negotiating a
   * revision it has not taken the transport yet, and its close would leave a starting stdio server running.
   */
  private transport: Transport | undefined;
  /** Incremented per connection attempt and on loss; callbacks of an older client compare and ignore themselves. */
  private generation = 0;
  private lastError: string | undefined;
  private connectedAt: Date | null = null;
  private closed = false;
  private checking = false;
  private relisting = false;
  private relistAgain = false;
  /** The protocol revision negotiated with the server (the newest both speak). */
  private revision: string | undefined;
  /** The open subscriptions/listen stream of a 2026-07-28 connection. */
  private listening: McpSubscription | undefined;
  /** The stdio server's stderr during the current connection attempt (cleared per attempt, so a line shows once). */
  private stderrTail: string[] = [];
  private readonly listing: ToolListing;
  private readonly retries: Reconnection;
  /** Bytes read from the server so far (counted by the result bound): a server still sending is alive. */
  private bytesRead = 0;
  /** Calls in flight, so that what the server asks during one reaches that call's client (src/mcp/relay/). */
  private readonly calls: CallRegistry;
  private settle!: () => void;
  readonly firstAttempt = new Promise<void>((resolve) => (this.settle = resolve));
  private readonly log: Logger;
  /** While needs_authorization: why, as the OAuth side said when the connection was lost. */
  private authNeeded: AuthorizationNeeded | undefined;
  /** The log level toolrouter's sessions want of its upstreams (relay/levels.ts); sent on every (re)connect. */
  private logLevel: LogLevel | undefined;

  constructor(
    readonly name: string,
    readonly config: UpstreamServerConfig,
    readonly origin: UpstreamOrigin,
    catalog: Catalog,
    private readonly options: ConnectionOptions,
    private readonly onStatus: (status: UpstreamStatus) => void,
    private readonly onFeatures: (change: FeaturesChange) => void = () => {},
  ) {
    this.log = options.log.child({ upstream: name });
    this.listing = new ToolListing(name, catalog, options.separator, options.transforms, this.log);
    this.retries = new Reconnection(options);
    this.calls = new CallRegistry(name);
  }

  start(): void {
    void this.connect();
  }

  isConnected(): boolean {
    return this.state === 'connected';
  }

  remembers(qualifiedName: string): boolean {
    return this.state !== 'connected' && this.listing.remembers(qualifiedName);
  }

  unavailable(): UpstreamError {
    const needs = this.state === 'needs_authorization' ? this.authNeeded : undefined;
    if (needs) {
      return new UpstreamError('upstream_unavailable', `upstream MCP server "${this.name}" is unavailable: needs authorization (${needs.reason}: ${needs.message})`, 60, this.name);
    }
    const state =
      this.state !== 'connecting' ? 'is not connected' : this.retries.failures > 0 || this.listing.rememberedSize > 0 ? 'is reconnecting' : 'is still connecting';
    return new UpstreamError('upstream_unavailable', `upstream MCP server "${this.name}" ${state}${this.lastError ? ` (${this.lastError})` : ''}; retry later`, this.retries.retryAfterSeconds(), this.name);
  }

  status(): UpstreamStatus {
    const notConnected = this.state !== 'connected';
    return {
      name: this.name,
      transport: transportKind(this.config),
      origin: this.origin,
      state: this.state,
      tools: this.listing.size,
      ...(!notConnected && this.revision !== undefined ? { revision: this.revision } : {}),
      ...(notConnected && this.listing.rememberedSize > 0 ? { knownTools: this.listing.rememberedSize } : {}),
      ...(notConnected && this.retries.retryAt !== undefined ? { retryAt: new Date(this.retries.retryAt).toISOString() } : {}),
      connectedAt: this.connectedAt?.toISOString() ?? null,
      failures: this.retries.failures,
      ...(this.options.auth ? { auth: 'oauth' as const } : {}),
      ...(this.state === 'needs_authorization' && this.authNeeded ? { authorization: this.authNeeded } : {}),
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
      clashes: [...this.listing.clashes],
      skipped: [...this.listing.skipped],
      transformProblems: [...this.listing.transformProblems],
    };
  }

  async call(qualifiedName: string, args: Record<string, unknown> | undefined, options: UpstreamCallOptions): Promise<CallToolResult> {
    const client = this.client;
    const upstreamName = this.listing.upstreamName(qualifiedName);
    if (this.state !== 'connected' || !client || upstreamName === undefined) throw this.unavailable();
    const generation = this.generation;
    try {
      const transform = this.listing.transform(qualifiedName);
      const mapped = transform ? mapArguments(transform, args) : args;
      const asTask = runsAsTask(client, this.taskSupport(qualifiedName), options);
      return await this.calls.run(options.relay?.channel, () => (asTask ? callAsTask : callTool)(client, upstreamName, mapped, options));
    } catch (error) {
      throw this.failure(error, `"${qualifiedName}"`, generation, options);
    }
  }

  /**
   * A tool's name at the upstream, its arguments as the upstream takes them (transforms applied) and whether it must run
   * as a task, for a call sent on another connection to the same server (a user's own, upstream/per-user.ts). Throws
   * while this one is not connected.
   */
  upstreamCall(
    qualifiedName: string,
    args: Record<string, unknown> | undefined,
  ): { name: string; args: Record<string, unknown> | undefined; taskSupport: 'required' | 'optional' | undefined } {
    const upstreamName = this.listing.upstreamName(qualifiedName);
    if (this.state !== 'connected' || upstreamName === undefined) throw this.unavailable();
    const transform = this.listing.transform(qualifiedName);
    return { name: upstreamName, args: transform ? mapArguments(transform, args) : args, taskSupport: this.taskSupport(qualifiedName) };
  }

  /** Tells the server the log level toolrouter's sessions want (now if connected, else once connected). */
  setLogLevel(level: LogLevel): void {
    this.logLevel = level;
    if (this.state === 'connected' && this.client) this.applyLogLevel(this.client);
  }

  private applyLogLevel(client: Client): void {
    const level = this.logLevel;
    if (level === undefined) return;
    setUpstreamLogLevel(client, level, this.options.connectTimeoutMs).catch((error: unknown) => this.log.debug({ err: error, level }, 'logging/setLevel not taken'));
  }

  /** Whether the server runs this tool only as a task (execution.taskSupport "required"). */
  requiresTask(qualifiedName: string): boolean {
    return this.listing.requiresTask(qualifiedName);
  }

  /** The tool's execution.taskSupport as the server listed it ("forbidden" and absent alike: undefined). */
  private taskSupport(qualifiedName: string): 'required' | 'optional' | undefined {
    return this.listing.requiresTask(qualifiedName) ? 'required' : this.listing.offersTask(qualifiedName) ? 'optional' : undefined;
  }

  /** Resources, templates and prompts as last listed; none while not connected. */
  offered(): UpstreamFeatures {
    return this.state === 'connected' ? this.features : NO_FEATURES;
  }

  /** Forwards resources/read, prompts/get or a subscription change to this server as it is. */
  async forward<T extends z.ZodType>(
    request: { method: string; params: Record<string, unknown> },
    schema: T,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<z.infer<T>> {
    const client = this.client;
    if (this.state !== 'connected' || !client) throw this.unavailable();
    const generation = this.generation;
    try {
      return await forward(client, request, schema, options);
    } catch (error) {
      throw this.failure(error, request.method, generation, options);
    }
  }

  /** Subscribes upstream to a resource the first time any session asks; re-done after a reconnect. */
  async subscribe(uri: string, options: { timeoutMs: number }): Promise<void> {
    const count = this.subscriptions.get(uri) ?? 0;
    if (count === 0 && !this.modern()) await this.forward({ method: 'resources/subscribe', params: { uri } }, EmptyResultSchema, options);
    this.subscriptions.set(uri, count + 1);
    if (count === 0 && this.modern()) await this.relisten(options.timeoutMs);
  }

  async unsubscribe(uri: string, options: { timeoutMs: number }): Promise<void> {
    const count = this.subscriptions.get(uri) ?? 0;
    if (count <= 1) {
      this.subscriptions.delete(uri);
      if (count === 1 && this.state === 'connected') {
        if (this.modern()) await this.relisten(options.timeoutMs).catch(() => {});
        else await this.forward({ method: 'resources/unsubscribe', params: { uri } }, EmptyResultSchema, options).catch(() => {});
      }
    } else {
      this.subscriptions.set(uri, count - 1);
    }
  }

  /** Re-applies the last listing, e.g. after the owner of a clashing name went away. */
  republish(): void {
    if (this.state === 'connected' && this.listing.republish()) this.onStatus(this.status());
  }

  /** Connects now unless connected or connecting (a new OAuth grant): no dropped connection, no wait for the backoff. */
  reconnectNow(): void {
    if (this.closed || this.state === 'connected' || this.state === 'connecting') return;
    this.retries.stop();
    this.state = 'connecting';
    void this.connect();
  }

  /** Drops the current connection (if any) and connects again now, without waiting for the backoff (admin reconnect). */
  reconnect(): void {
    if (this.closed) return;
    this.generation++;
    this.retries.stop();
    const client = this.client;
    const transport = this.transport;
    this.client = undefined;
    this.transport = undefined;
    if (this.state === 'connected') this.listing.withdraw();
    this.retries.failures = 0;
    void client?.close().catch(() => {});
    void transport?.close().catch(() => {});
    // An OAuth server's discovery is redone too: a reconnect is the admin's cure for a wrong authorization server.
    const forgotten = this.options.auth?.forgetDiscovery?.().catch((error: unknown) => this.log.warn({ err: error }, 'could not forget the OAuth discovery'));
    // Without OAuth the attempt starts at once, as before (its status says connecting when the reconnect answers).
    if (forgotten) void forgotten.then(() => this.connect());
    else void this.connect();
  }

  /** Closes the connection; `forget` also takes its tools out of the catalog (the server was removed). */
  async close(forget = false): Promise<void> {
    this.closed = true;
    this.generation++;
    this.retries.stop();
    this.state = 'closed';
    const client = this.client;
    const transport = this.transport;
    this.client = undefined;
    this.transport = undefined;
    this.settle();
    if (forget) {
      this.listing.clear();
      if (this.features !== NO_FEATURES) {
        this.features = NO_FEATURES;
        this.onFeatures({ kind: 'lists' });
      }
    }
    if (client) {
      // Tell the server the session is over (courtesy; it would expire anyway). Bounded: the server may be gone.
      await withTimeout(terminateSession(client.transport), 1_000).catch(() => {});
      await client.close().catch(() => {});
    }
    // A stdio server's processes have ended when this resolves (transport.ts), also one that was still starting.
    await transport?.close().catch(() => {});
  }

  /** Connected over the stateless 2026-07-28 revision (change notifications come on a subscriptions/listen stream). */
  private modern(): boolean {
    return this.state === 'connected' && this.client?.getProtocolEra() === 'modern';
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const generation = ++this.generation;
    // A server waiting for authorization keeps saying so during its background retries.
    if (this.state !== 'needs_authorization') this.state = 'connecting';
    this.onStatus(this.status());
    // 'auto': probe with server/discover and use 2026-07-28 when the server offers it; an older server gets the plain
    // 2025 initialize (and so negotiates 2025-11-25, 2025-06-18, ... as before).
    // What callers may be able to do (elicitation, sampling) is declared; each request is refused or relayed per call.
    const client = new Client(IMPLEMENTATION, { capabilities: RELAY_CAPABILITIES, versionNegotiation: { mode: 'auto' } });
    installRelayHandlers(client, this.calls, this.log);
    this.listening = undefined;
    this.lastTransportError = undefined;
    this.lastHttpFailure = undefined;
    this.stderrTail = [];
    // While connecting, the failed connect() below reports the cause; the SDK closes the client first, and this
    // handler would otherwise record only "connection closed".
    client.onclose = () => {
      if (this.state !== 'connecting' && this.state !== 'needs_authorization') this.lost(generation, this.lastTransportError ? this.describe(this.lastTransportError) : 'connection closed');
    };
    client.onerror = (error) => {
      if (generation === this.generation) this.lastTransportError = error;
      this.transportError(generation, error);
    };
    // The same handlers serve both revisions: 2025 servers send these unsolicited, 2026-07-28 servers on the
    // subscriptions/listen stream opened below.
    client.setNotificationHandler('notifications/tools/list_changed', () => {
      this.log.debug('upstream tool list changed');
      void this.relist(generation);
    });
    client.setNotificationHandler('notifications/resources/list_changed', () => void this.relistFeatures(generation));
    client.setNotificationHandler('notifications/prompts/list_changed', () => void this.relistFeatures(generation));
    client.setNotificationHandler('notifications/resources/updated', (notification) => {
      if (generation === this.generation) this.onFeatures({ kind: 'resourceUpdated', uri: notification.params.uri });
    });
    this.client = client;
    let transport: Transport | undefined;
    try {
      transport = this.transport = createTransport(this.config, {
        maxResultBytes: this.options.maxResultBytes,
        onRead: (bytes) => {
          this.bytesRead += bytes;
        },
        ...(this.options.auth ? { authProvider: this.options.auth.provider } : {}),
        ...('url' in this.config && this.config.passthroughHeaders ? { passthrough: { server: this.name, headers: this.config.passthroughHeaders } } : {}),
        onStderr: (line) => {
          this.log.debug({ stderr: line }, 'upstream stderr');
          if (generation !== this.generation) return;
          this.stderrTail.push(line.slice(0, 500));
          if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
        },
        onHttpFailure: (failure) => {
          if (generation === this.generation) this.lastHttpFailure = failure;
        },
      });
      // One deadline for the whole connect: the revision probe (server/discover) and initialize each took the full
      // timeout, so a server that never answers was given twice connectTimeoutMs.
      await connectWithin(client, transport, this.options.connectTimeoutMs);
      this.revision = client.getNegotiatedProtocolVersion();
      const tools = await listAllTools(client, this.options.connectTimeoutMs);
      const features = await listFeatures(client, this.options.connectTimeoutMs);
      if (generation !== this.generation) return this.discard(client, transport);
      if (client.getProtocolEra() === 'modern') await this.listen(client, generation);
      else for (const uri of this.subscriptions.keys()) await client.subscribeResource({ uri }, { timeout: this.options.connectTimeoutMs });
      if (generation !== this.generation) return this.discard(client, transport);
      this.features = features;
      this.state = 'connected';
      this.authNeeded = undefined;
      this.retries.succeeded();
      this.lastError = undefined;
      this.connectedAt = new Date();
      this.listing.publish(tools, this.about(client));
      this.applyLogLevel(client);
      this.onStatus(this.status());
      this.onFeatures({ kind: 'lists' });
      this.log.info(
        {
          tools: this.listing.size,
          resources: features.resources.length,
          templates: features.templates.length,
          prompts: features.prompts.length,
          server: client.getServerVersion(),
          revision: this.revision,
        },
        'upstream connected',
      );
      this.retries.keepAlive(() => this.stillAlive(generation));
    } catch (error) {
      // The SDK's own account (its negotiation steps, error codes) is for debugging; the status gets one plain line.
      this.log.debug({ err: error }, 'upstream connection attempt failed');
      if (generation !== this.generation) return this.discard(client, transport);
      this.lost(generation, describeConnectFailure(error, transportKind(this.config), this.lastHttpFailure));
    } finally {
      this.settle();
    }
  }

  /**
   * What the server is for, indexed with its tools and named in search_tools: the config entry's `description` if
   * given, else what the server said when it connected (serverInfo title and description, then its `instructions`).
   */
  private about(client: Client): string | undefined {
    if (this.config.description !== undefined) return this.config.description;
    const info = client.getServerVersion() as { title?: unknown; description?: unknown } | undefined;
    const said = [info?.title, info?.description, client.getInstructions()].filter((part): part is string => typeof part === 'string' && part.trim() !== '');
    return said.length > 0 ? said.join('. ') : undefined;
  }

  /**
   * A client whose attempt was overtaken (closed, removed, reconnected) while it was still connecting: closed now, since
   * a stdio transport may have spawned its process after the close that was meant for it.
   */
  private discard(client: Client, transport: Transport | undefined): void {
    void client.close().catch(() => {});
    void transport?.close().catch(() => {});
  }

  private describe(error: unknown): string {
    return describeUpstreamError(error, this.lastHttpFailure);
  }

  /** Re-lists after `notifications/tools/list_changed`; notifications during a listing cause one more listing. */
  private async relist(generation: number): Promise<void> {
    if (this.relisting) {
      this.relistAgain = true;
      return;
    }
    this.relisting = true;
    try {
      do {
        this.relistAgain = false;
        const client = this.client;
        if (generation !== this.generation || this.state !== 'connected' || !client) return;
        const tools = await listAllTools(client, this.options.connectTimeoutMs);
        if (generation !== this.generation) return;
        this.listing.publish(tools, this.about(client));
        this.onStatus(this.status());
      } while (this.relistAgain);
    } catch (error) {
      this.lost(generation, `re-listing tools failed: ${this.describe(error)}`);
    } finally {
      this.relisting = false;
    }
  }

  /** Re-lists resources, templates and prompts after their list_changed notifications. */
  private async relistFeatures(generation: number): Promise<void> {
    const client = this.client;
    if (generation !== this.generation || this.state !== 'connected' || !client) return;
    try {
      const features = await listFeatures(client, this.options.connectTimeoutMs);
      if (generation !== this.generation) return;
      this.features = features;
      this.onFeatures({ kind: 'lists' });
    } catch (error) {
      this.lost(generation, `re-listing resources and prompts failed: ${this.describe(error)}`);
    }
  }

  /**
   * Opens the subscriptions/listen stream of a 2026-07-28 connection: list changes of tools, resources and prompts,
   * and updates of the resources our clients subscribed to. When the stream ends unexpectedly, a ping decides whether
   * the server is gone; if it is not, the stream is opened again.
   */
  private async listen(client: Client, generation: number): Promise<void> {
    const capabilities = client.getServerCapabilities() ?? {};
    const subscription = await client.listen(
      {
        ...(capabilities.tools?.listChanged ? { toolsListChanged: true } : {}),
        ...(capabilities.resources?.listChanged ? { resourcesListChanged: true } : {}),
        ...(capabilities.prompts?.listChanged ? { promptsListChanged: true } : {}),
        ...(this.subscriptions.size > 0 ? { resourceSubscriptions: [...this.subscriptions.keys()] } : {}),
      },
      { timeout: this.options.connectTimeoutMs },
    );
    const previous = this.listening;
    this.listening = subscription;
    void previous?.close().catch(() => {});
    void subscription.closed.then(async (how) => {
      if (how !== 'remote' || this.listening !== subscription || generation !== this.generation) return;
      await this.check(generation);
      if (generation === this.generation && this.state === 'connected' && this.client === client) {
        await this.listen(client, generation).catch((error: unknown) => this.lost(generation, `subscriptions/listen failed: ${this.describe(error)}`));
      }
    });
  }

  /** A new listen stream with the current resource subscriptions (the filter of an open one cannot change). */
  private async relisten(timeoutMs: number): Promise<void> {
    const client = this.client;
    if (!client || !this.modern()) return;
    await withTimeout(this.listen(client, this.generation), timeoutMs);
  }

  private failure(error: unknown, what: string, generation: number, options: { timeoutMs: number; signal?: AbortSignal }): UpstreamError {
    return callFailure(this.name, error, what, options, () => void this.check(generation), (cause) => this.describe(cause));
  }

  private transportError(generation: number, error: Error): void {
    if (generation !== this.generation) return;
    this.log.debug({ err: error }, 'upstream transport error');
    // The HTTP transport reports a broken event stream here and retries it a few times on its own; once it gives up,
    // notifications (list_changed) no longer arrive, so the connection is only half alive: start over.
    if (/Maximum reconnection attempts/i.test(error.message)) this.lost(generation, `event stream lost: ${error.message}`);
    else if (this.state === 'connected') void this.check(generation);
  }

  /** The periodic ping: true while this connection is still the current one and alive. */
  private async stillAlive(generation: number): Promise<boolean> {
    await this.check(generation);
    return generation === this.generation && this.state === 'connected';
  }

  /** A ping decides whether an error was the connection dying. */
  private async check(generation: number): Promise<void> {
    const client = this.client;
    if (this.checking || generation !== this.generation || this.state !== 'connected' || !client) return;
    this.checking = true;
    const readBefore = this.bytesRead;
    try {
      const options = { timeout: Math.min(this.options.connectTimeoutMs, Math.max(this.options.pingIntervalMs, 1_000)) };
      // 2026-07-28 has no ping; server/discover is its cheapest request.
      if (client.getProtocolEra() === 'modern') await client.discover(options);
      else await client.ping(options);
    } catch (error) {
      // A server streaming a large answer (refused piece by piece by the result bound) answers the ping only after it:
      // bytes arriving during the ping mean it is alive, not gone.
      if (this.bytesRead !== readBefore) {
        this.log.debug({ err: error }, 'ping unanswered while the server was sending; still connected');
        return;
      }
      this.lost(generation, `ping failed: ${this.describe(error)}`);
    } finally {
      this.checking = false;
    }
  }

  /**
   * The connection is gone (or never came up): tools leave the catalog but stay remembered (listing.ts), and a
   * reconnect is scheduled.
   */
  private lost(generation: number, reason: string): void {
    if (generation !== this.generation || this.closed) return;
    this.generation++;
    const client = this.client;
    const transport = this.transport;
    this.client = undefined;
    this.transport = undefined;
    const wasConnected = this.state === 'connected';
    // An OAuth server whose 401 could not be cured waits for the admin; the retries below still pick up a grant that
    // another instance obtained, and a refresh that failed for a passing reason.
    const needs = this.options.auth?.needed();
    this.authNeeded = needs;
    this.state = needs ? 'needs_authorization' : 'down';
    const stderr = [...new Set(this.stderrTail)].slice(-STDERR_IN_ERROR);
    // One readable line: an SDK validation failure's message is its issues as pretty JSON, kilobytes of it.
    const line = readableLine(reason);
    this.lastError = stderr.length > 0 ? `${line} (stderr: ${stderr.join(' | ')})` : line;
    this.connectedAt = null;
    this.listing.withdraw();
    const hadFeatures = this.features !== NO_FEATURES;
    this.features = NO_FEATURES;
    if (hadFeatures) this.onFeatures({ kind: 'lists' });
    // Closing fires onclose again; the generation check above ignores it.
    void client?.close().catch(() => {});
    void transport?.close().catch(() => {});
    const refusal = this.options.auth?.refusal?.();
    const needed = needsPerson({ reason: this.lastError, ...(needs ? { authorization: needs } : {}), ...(refusal ? { refusal } : {}) });
    if (needed) {
      // Said once, and not retried: nothing changes until someone acts (reconnectNow/reconnect resume).
      this.retries.park();
      this.log.warn({ reason: this.lastError, wasConnected, failures: this.retries.failures }, `upstream waits for a person, not retrying until then; needed: ${needed}`);
      this.onStatus(this.status());
      return;
    }
    const delay = this.retries.failed(() => void this.connect());
    // warn both when a live connection drops and when a connection attempt fails: either way tools are missing.
    this.log.warn(
      { reason: this.lastError, wasConnected, retryInMs: Math.round(delay), failures: this.retries.failures },
      needs ? `upstream needs authorization (${needs.reason})` : 'upstream down',
    );
    this.onStatus(this.status());
  }
}
