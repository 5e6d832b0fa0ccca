import { EventEmitter, setMaxListeners } from 'node:events';
import { Client, ProtocolError, SdkError, SdkErrorCode, StreamableHTTPClientTransport, type McpSubscription, type Transport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { CallToolResultSchema, EmptyResultSchema, type CallToolResult, type Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { Tool } from '../catalog/types.js';
import { validateTools } from '../catalog/validate.js';
import type { z } from 'zod';
import { bodyExcerpt, describeUpstreamError, withoutRepeatedCode, type HttpFailure } from './errors.js';
import { listFeatures, NO_FEATURES, servesUri, type UpstreamFeatures } from './features.js';
import { applyTransform, mapArguments, transformServer, type ToolTransform } from './transform.js';
import { IMPLEMENTATION } from './version.js';

/** An upstream MCP server: a command spawned with stdio, or a streamable HTTP endpoint. */
export type UpstreamServerConfig =
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string; description?: string }
  | { url: string; headers?: Record<string, string>; description?: string };

export interface UpstreamManagerOptions {
  servers: Record<string, UpstreamServerConfig>;
  /** Between server and tool name; '' turns namespacing off (then equal names across servers clash). */
  separator: string;
  reconnect: { initialMs: number; maxMs: number };
  /** Connecting (initialize) and each tools/list page. */
  connectTimeoutMs: number;
  /** 0 turns the liveness ping off. */
  pingIntervalMs: number;
  /** Tool transformations by qualified upstream tool name (mcp.transforms); none when absent. */
  transforms?: Record<string, ToolTransform>;
  log: Logger;
}

export type UpstreamState = 'connecting' | 'connected' | 'down' | 'closed';

export interface UpstreamStatus {
  name: string;
  transport: 'stdio' | 'http';
  state: UpstreamState;
  /** Tools of this server in the catalog now. */
  tools: number;
  /** While connected: the protocol revision negotiated (the newest both sides speak, e.g. 2026-07-28 or 2025-11-25). */
  revision?: string;
  /**
   * While the server is not connected: its tools as last listed, kept so that calls to them answer
   * upstream_unavailable naming this server (they are out of the catalog, listings and search until it is back).
   */
  knownTools?: number;
  /** While down: when the next connection attempt is due (ISO time). */
  retryAt?: string;
  connectedAt: string | null;
  /** Consecutive failed connection attempts. */
  failures: number;
  lastError?: string;
  /** Qualified names another source already owns; these tools of this server are left out. */
  clashes: string[];
  /** Tools the server lists that are not valid MCP tools (bad name, bad schema), left out with the reason. */
  skipped: string[];
  /**
   * Configured transforms that do not fit what the server lists: a tool it does not have (nothing is transformed), or
   * an argument the tool does not have / a rename onto one it has (that tool is left out rather than served untransformed).
   */
  transformProblems: string[];
}

export type UpstreamErrorKind = 'timeout' | 'unavailable' | 'error';

/** A forwarded call that did not produce a result: timed out, no connection, or the upstream answered with an error. */
export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  constructor(
    readonly kind: UpstreamErrorKind,
    message: string,
    /** For 'unavailable': seconds until the server's next connection attempt (REST Retry-After). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** A progress notification from the upstream, for relaying to whoever asked with a progress token. */
export interface UpstreamProgress {
  progress: number;
  total?: number;
  message?: string;
}

export interface UpstreamCallOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  /** Asks the upstream for progress notifications (a progress token of our own) and receives them. */
  onProgress?: (progress: UpstreamProgress) => void;
}

/** Resources or prompts a server offers changed (it connected, went down, or re-listed), or a subscribed resource did. */
export type FeaturesChange = { kind: 'lists' } | { kind: 'resourceUpdated'; uri: string };

export interface UpstreamEvents {
  /** A server's state or its tools in the catalog changed. */
  status: [UpstreamStatus];
  /** What a server offers besides tools changed; `server` names it. */
  features: [server: string, change: FeaturesChange];
}

/**
 * Keeps one connection per configured upstream MCP server and mirrors its tools into the catalog as the source named
 * after the server: tools enter when it connects, are re-listed on `notifications/tools/list_changed`, and leave while
 * it is down. A lost server is reconnected with capped exponential backoff. Calls are routed by qualified name.
 */
export class UpstreamManager extends EventEmitter<UpstreamEvents> {
  private readonly connections = new Map<string, UpstreamConnection>();

  constructor(
    private readonly catalog: Catalog,
    private readonly options: UpstreamManagerOptions,
  ) {
    super();
    for (const [name, config] of Object.entries(options.servers)) {
      // Reserved for good: while the server is down its name must not be taken by a static source either.
      catalog.reserveSource(name, `upstream MCP server "${name}"`);
      const connection = new UpstreamConnection(
        name,
        config,
        catalog,
        options,
        (status) => {
          this.emit('status', status);
          // Clashing tools of other servers may take over the names this one just gave up.
          if (status.state === 'down') for (const other of this.connections.values()) if (other !== connection) other.republish();
        },
        (change) => this.emit('features', name, change),
      );
      this.connections.set(name, connection);
    }
  }

  /** Starts connecting every server in the background; never waits for (or fails on) slow or dead upstreams. */
  start(): void {
    for (const connection of this.connections.values()) connection.start();
  }

  /** Resolves once every server has finished its first connection attempt, successful or not. */
  async settled(): Promise<void> {
    await Promise.all([...this.connections.values()].map((connection) => connection.firstAttempt));
  }

  status(): UpstreamStatus[] {
    return [...this.connections.values()].map((connection) => connection.status());
  }

  /** Whether a catalog source is one of the upstream servers (so its tools can be called). */
  ownsSource(source: string): boolean {
    return this.connections.has(source);
  }

  /**
   * The server a tool name belongs to while that server is not connected: one that listed the tool before it went down,
   * else (with namespacing on) the configured server whose prefix the name carries, so that a tool of a server that
   * never came up is not mistaken for an unknown tool.
   */
  unavailableServer(qualifiedName: string, separator: string): string | undefined {
    for (const connection of this.connections.values()) if (connection.remembers(qualifiedName)) return connection.name;
    if (separator === '') return undefined;
    for (const connection of this.connections.values()) {
      if (!connection.isConnected() && qualifiedName.startsWith(`${connection.name}${separator}`)) return connection.name;
    }
    return undefined;
  }

  /** The UpstreamError for a call to a tool of a server that is not connected. */
  unavailableError(server: string): UpstreamError {
    const connection = this.connections.get(server);
    return connection ? connection.unavailable() : new UpstreamError('unavailable', `upstream MCP server "${server}" is not configured`);
  }

  /**
   * Resources, resource templates and prompts of the connected servers `visible` allows, in server order. Names are
   * namespaced like tools (`server__name`); URIs stay the server's own, so links in tool results remain readable.
   */
  offered(visible: (server: string) => boolean): Omit<UpstreamFeatures, 'subscribe'> {
    const all: Omit<UpstreamFeatures, 'subscribe'> = { resources: [], templates: [], prompts: [] };
    for (const connection of this.connections.values()) {
      if (!visible(connection.name)) continue;
      const features = connection.offered();
      all.resources.push(...features.resources.map((resource) => ({ ...resource, name: this.qualify(connection.name, resource.name) })));
      all.templates.push(...features.templates.map((template) => ({ ...template, name: this.qualify(connection.name, template.name) })));
      all.prompts.push(...features.prompts.map((prompt) => ({ ...prompt, name: this.qualify(connection.name, prompt.name) })));
    }
    return all;
  }

  /** The connected server (of those `visible`) that serves a resource URI: the first that listed it or has a template for it. */
  resourceOwner(uri: string, visible: (server: string) => boolean): UpstreamConnection | undefined {
    const candidates = [...this.connections.values()].filter((connection) => visible(connection.name));
    return (
      candidates.find((connection) => connection.offered().resources.some((resource) => resource.uri === uri)) ??
      candidates.find((connection) => servesUri(connection.offered(), uri))
    );
  }

  /** The connected server (of those `visible`) with a prompt of this qualified name, and the prompt's own name. */
  promptOwner(qualifiedName: string, visible: (server: string) => boolean): { connection: UpstreamConnection; name: string } | undefined {
    for (const connection of this.connections.values()) {
      if (!visible(connection.name)) continue;
      const prompt = connection.offered().prompts.find((candidate) => this.qualify(connection.name, candidate.name) === qualifiedName);
      if (prompt) return { connection, name: prompt.name };
    }
    return undefined;
  }

  private qualify(server: string, name: string): string {
    return this.options.separator === '' ? name : `${server}${this.options.separator}${name}`;
  }

  /** Forwards a call to the server owning the qualified tool name, under the upstream's own tool name. */
  async callTool(qualifiedName: string, args: Record<string, unknown> | undefined, options: UpstreamCallOptions): Promise<CallToolResult> {
    const source = this.catalog.get(qualifiedName)?.source;
    const connection = source === undefined ? undefined : this.connections.get(source);
    if (!connection) throw new UpstreamError('unavailable', `no upstream MCP server serves "${qualifiedName}"`);
    return connection.call(qualifiedName, args, options);
  }

  async close(): Promise<void> {
    await Promise.all([...this.connections.values()].map((connection) => connection.close()));
  }
}

/**
 * The SDK's stdio transport, probing in place: the v2 client negotiates a revision on the base class by spawning a
 * throwaway sibling process for its server/discover probe, then the real one; a subclass probes on the real child's
 * pipe (a 2025 server answers the unknown method with an error, and initialize follows on the same pipe). One process
 * per connection, as before, and half the start-up time for servers that are slow to start.
 */
class InPlaceStdioTransport extends StdioClientTransport {}

const STDERR_TAIL_LINES = 20;
/** Guards against an upstream whose cursors never end. */
const MAX_LIST_PAGES = 1_000;

export class UpstreamConnection {
  private features: UpstreamFeatures = NO_FEATURES;
  /** Resource URI → how many of our sessions subscribed to it (one upstream subscription each). */
  private readonly subscriptions = new Map<string, number>();
  /** Qualified names of the tools it had in the catalog when it went down; empty while connected. */
  private remembered = new Set<string>();
  private retryAt: number | undefined;
  /** The last non-2xx HTTP response of this upstream; its status line and WWW-Authenticate go into the error. */
  private lastHttpFailure: HttpFailure | undefined;
  /** The transport's last error: the real cause when the SDK then reports only "connection closed". */
  private lastTransportError: unknown;
  private state: UpstreamState = 'down';
  private client: Client | undefined;
  /** Incremented per connection attempt and on loss; callbacks of an older client compare and ignore themselves. */
  private generation = 0;
  private failures = 0;
  private lastError: string | undefined;
  private connectedAt: Date | null = null;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private checking = false;
  private relisting = false;
  private relistAgain = false;
  /** The server's tools as last listed, under their own names; kept to re-publish when a clash resolves. */
  private listed: McpTool[] = [];
  /** The protocol revision negotiated with the server (the newest both speak). */
  private revision: string | undefined;
  /** The open subscriptions/listen stream of a 2026-07-28 connection. */
  private listening: McpSubscription | undefined;
  /** Qualified name → the upstream's own tool name, for tools currently in the catalog. */
  private readonly toUpstream = new Map<string, string>();
  /** Qualified (transformed) name → the transform applied, for mapping call arguments back. */
  private readonly transformOf = new Map<string, ToolTransform>();
  /** This server's transforms by qualified upstream name (all of them when names are not namespaced). */
  private readonly transforms: Map<string, ToolTransform>;
  private clashes: string[] = [];
  private skipped: string[] = [];
  private transformProblems: string[] = [];
  private readonly stderrTail: string[] = [];
  private settle!: () => void;
  readonly firstAttempt = new Promise<void>((resolve) => (this.settle = resolve));
  private readonly log: Logger;
  private readonly transportKind: 'stdio' | 'http';

  constructor(
    readonly name: string,
    private readonly config: UpstreamServerConfig,
    private readonly catalog: Catalog,
    private readonly options: UpstreamManagerOptions,
    private readonly onStatus: (status: UpstreamStatus) => void,
    private readonly onFeatures: (change: FeaturesChange) => void = () => {},
  ) {
    this.log = options.log.child({ upstream: name });
    this.transportKind = 'url' in config ? 'http' : 'stdio';
    const servers = Object.keys(options.servers);
    this.transforms = new Map(
      Object.entries(options.transforms ?? {}).filter(([key]) => options.separator === '' || transformServer(key, servers, options.separator) === name),
    );
  }

  start(): void {
    void this.connect();
  }

  isConnected(): boolean {
    return this.state === 'connected';
  }

  remembers(qualifiedName: string): boolean {
    return this.state !== 'connected' && this.remembered.has(qualifiedName);
  }

  unavailable(): UpstreamError {
    const state = this.state !== 'connecting' ? 'is not connected' : this.failures > 0 || this.remembered.size > 0 ? 'is reconnecting' : 'is still connecting';
    const retryAfter = this.retryAt === undefined ? 1 : Math.max(1, Math.ceil((this.retryAt - Date.now()) / 1000));
    return new UpstreamError('unavailable', `upstream MCP server "${this.name}" ${state}${this.lastError ? ` (${this.lastError})` : ''}; retry later`, retryAfter);
  }

  status(): UpstreamStatus {
    const notConnected = this.state !== 'connected';
    return {
      name: this.name,
      transport: this.transportKind,
      state: this.state,
      tools: this.toUpstream.size,
      ...(!notConnected && this.revision !== undefined ? { revision: this.revision } : {}),
      ...(notConnected && this.remembered.size > 0 ? { knownTools: this.remembered.size } : {}),
      ...(notConnected && this.retryAt !== undefined ? { retryAt: new Date(this.retryAt).toISOString() } : {}),
      connectedAt: this.connectedAt?.toISOString() ?? null,
      failures: this.failures,
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
      clashes: [...this.clashes],
      skipped: [...this.skipped],
      transformProblems: [...this.transformProblems],
    };
  }

  async call(qualifiedName: string, args: Record<string, unknown> | undefined, options: UpstreamCallOptions): Promise<CallToolResult> {
    const client = this.client;
    const upstreamName = this.toUpstream.get(qualifiedName);
    if (this.state !== 'connected' || !client || upstreamName === undefined) throw this.unavailable();
    const generation = this.generation;
    try {
      // request() rather than callTool(): callTool also checks structured output against the tool's outputSchema, and
      // a proxy hands the upstream's result back as it is.
      const transform = this.transformOf.get(qualifiedName);
      const upstreamArgs = transform ? mapArguments(transform, args) : args;
      return await client.request(
        { method: 'tools/call', params: { name: upstreamName, ...(upstreamArgs === undefined ? {} : { arguments: upstreamArgs }) } },
        CallToolResultSchema as never,
        {
          timeout: options.timeoutMs,
          signal: options.signal,
          // The SDK sends its own progress token upstream and hands us each notification for it.
          ...(options.onProgress ? { onprogress: options.onProgress } : {}),
        },
      );
    } catch (error) {
      throw this.failure(error, `"${qualifiedName}"`, generation, options);
    }
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
      return (await client.request(request, schema, { timeout: options.timeoutMs, signal: options.signal })) as z.infer<T>;
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

  /** Connected over the stateless 2026-07-28 revision (change notifications come on a subscriptions/listen stream). */
  private modern(): boolean {
    return this.state === 'connected' && this.client?.getProtocolEra() === 'modern';
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

  /** Why a forwarded request produced no result, as an UpstreamError. */
  private failure(error: unknown, what: string, generation: number, options: { timeoutMs: number; signal?: AbortSignal }): UpstreamError {
    if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
      // The SDK has already sent notifications/cancelled upstream.
      return new UpstreamError('timeout', `upstream MCP server "${this.name}" did not answer ${what} within ${options.timeoutMs} ms`);
    }
    if (error instanceof ProtocolError) {
      return new UpstreamError('error', `upstream MCP server "${this.name}" answered with an error: ${withoutRepeatedCode(error.message)}`);
    }
    // Our own client gave up on the call (the SDK forwarded the cancellation upstream): not the upstream's fault.
    if (options.signal?.aborted) return new UpstreamError('error', `the call to ${what} was cancelled`);
    // The connection failed under the call: find out now rather than at the next ping.
    void this.check(generation);
    return new UpstreamError('unavailable', `upstream MCP server "${this.name}" failed during ${what}: ${this.describe(error)}`, 1);
  }

  /** Re-applies the last listing, e.g. after the owner of a clashing name went away. */
  republish(): void {
    if (this.state === 'connected' && this.clashes.length > 0) this.publish(this.listed);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.generation++;
    clearTimeout(this.retryTimer);
    clearTimeout(this.pingTimer);
    this.state = 'closed';
    const client = this.client;
    this.client = undefined;
    this.settle();
    if (!client) return;
    const transport = client.transport;
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
      // Tell the server the session is over (courtesy; it would expire anyway). Bounded: the server may be gone.
      await withTimeout(transport.terminateSession(), 1_000).catch(() => {});
    }
    await client.close().catch(() => {});
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const generation = ++this.generation;
    this.state = 'connecting';
    this.onStatus(this.status());
    // 'auto': probe with server/discover and use 2026-07-28 when the server offers it; an older server gets the plain
    // 2025 initialize (and so negotiates 2025-11-25, 2025-06-18, ... as before).
    const client = new Client(IMPLEMENTATION, { capabilities: {}, versionNegotiation: { mode: 'auto' } });
    this.listening = undefined;
    this.lastTransportError = undefined;
    this.lastHttpFailure = undefined;
    // While connecting, the failed connect() below reports the cause; the SDK closes the client first, and this
    // handler would otherwise record only "connection closed".
    client.onclose = () => {
      if (this.state !== 'connecting') this.lost(generation, this.lastTransportError ? this.describe(this.lastTransportError) : 'connection closed');
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
    try {
      await client.connect(this.createTransport(), { timeout: this.options.connectTimeoutMs });
      this.revision = client.getNegotiatedProtocolVersion();
      const tools = await this.listAll(client);
      const features = await listFeatures(client, this.options.connectTimeoutMs);
      if (generation !== this.generation) return;
      if (client.getProtocolEra() === 'modern') await this.listen(client, generation);
      else for (const uri of this.subscriptions.keys()) await client.subscribeResource({ uri }, { timeout: this.options.connectTimeoutMs });
      if (generation !== this.generation) return;
      this.features = features;
      this.state = 'connected';
      this.failures = 0;
      this.lastError = undefined;
      this.retryAt = undefined;
      this.remembered.clear();
      this.connectedAt = new Date();
      this.publish(tools);
      this.onFeatures({ kind: 'lists' });
      this.log.info(
        {
          tools: this.toUpstream.size,
          resources: features.resources.length,
          templates: features.templates.length,
          prompts: features.prompts.length,
          server: client.getServerVersion(),
          revision: this.revision,
        },
        'upstream connected',
      );
      this.schedulePing(generation);
    } catch (error) {
      this.lost(generation, this.describe(error));
    } finally {
      this.settle();
    }
  }

  private createTransport(): Transport {
    if ('url' in this.config) {
      return new StreamableHTTPClientTransport(new URL(this.config.url), { requestInit: { headers: this.config.headers ?? {} }, fetch: this.recordingFetch });
    }
    const transport = new InPlaceStdioTransport({
      command: this.config.command,
      args: this.config.args ?? [],
      env: this.config.env,
      cwd: this.config.cwd,
      // Piped, not inherited: with `toolrouter stdio` our stderr is the client's log, and a server's chatter belongs in
      // our structured log; the last lines explain a crash in the status.
      stderr: 'pipe',
    });
    let partial = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines.filter((text) => text.trim().length > 0)) {
        this.log.debug({ stderr: line }, 'upstream stderr');
        this.stderrTail.push(line.slice(0, 500));
        if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
      }
    });
    return transport;
  }

  /**
   * The HTTP transport passes one long-lived AbortSignal to every fetch; undici detaches its abort listener only when the
   * request object is garbage-collected, so a busy upstream trips Node's listener-leak warning although nothing leaks.
   * Failed responses are remembered: the SDK's error keeps the body but not the status text or WWW-Authenticate.
   */
  private readonly recordingFetch: typeof fetch = async (input, init) => {
    if (init?.signal) setMaxListeners(0, init.signal);
    const response = await fetch(input, init);
    if (!response.ok) {
      const wwwAuthenticate = response.headers.get('www-authenticate') ?? undefined;
      const body = await bodyExcerpt(response);
      this.lastHttpFailure = { status: response.status, statusText: response.statusText, ...(wwwAuthenticate ? { wwwAuthenticate } : {}), body };
    }
    return response;
  };

  private describe(error: unknown): string {
    return describeUpstreamError(error, this.lastHttpFailure);
  }

  private async listAll(client: Client): Promise<McpTool[]> {
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; ; page++) {
      if (page >= MAX_LIST_PAGES) throw new Error(`tools/list did not end after ${MAX_LIST_PAGES} pages`);
      // Past the v2 client's result cache: a re-list after list_changed must see the server's list as it is now.
      const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: this.options.connectTimeoutMs, cacheMode: 'bypass' });
      // The v2 client's Tool type is its own; the JSON is the same.
      tools.push(...(result.tools as McpTool[]));
      if (!result.nextCursor || result.nextCursor === cursor) return tools;
      cursor = result.nextCursor;
    }
  }

  /** Puts the listed tools into the catalog under qualified names, leaving out invalid and clashing ones. */
  /**
   * What the server is for, indexed with its tools and named in search_tools: the config entry's `description` if
   * given, else what the server said when it connected (serverInfo title and description, then its `instructions`).
   */
  private about(): string | undefined {
    if (this.config.description !== undefined) return this.config.description;
    const info = this.client?.getServerVersion() as { title?: unknown; description?: unknown } | undefined;
    const said = [info?.title, info?.description, this.client?.getInstructions()].filter((part): part is string => typeof part === 'string' && part.trim() !== '');
    return said.length > 0 ? said.join('. ') : undefined;
  }

  private publish(tools: McpTool[]): void {
    this.listed = tools;
    const accepted: Tool[] = [];
    const mapping = new Map<string, string>();
    const clashes: string[] = [];
    const skipped: string[] = [];
    const transformProblems: string[] = [];
    const transformed = new Map<string, ToolTransform>();
    const matched = new Set<string>();
    // An empty separator turns namespacing off: tools keep the upstream's names, and equal names clash.
    const qualify = (name: string) => (this.options.separator === '' ? name : `${this.name}${this.options.separator}${name}`);
    for (const tool of tools) {
      if (tool.execution?.taskSupport === 'required') {
        // The gateway does not relay task-augmented calls (README, "MCP gateway"): a tool that can only run as a task
        // would be offered and then fail every call.
        skipped.push(`${tool.name}: requires task-augmented calls (execution.taskSupport "required"), which toolrouter does not relay`);
        continue;
      }
      let qualified = qualify(tool.name);
      let candidate: McpTool | Tool = { ...tool, name: qualified };
      const transform = this.transforms.get(qualified);
      if (transform) {
        matched.add(qualified);
        if (transform.hidden) continue;
        const result = applyTransform(candidate, transform, transform.name === undefined ? qualified : qualify(transform.name));
        if ('problems' in result) {
          transformProblems.push(...result.problems.map((problem) => `${problem}; the tool is left out`));
          continue;
        }
        candidate = result.tool;
        qualified = candidate.name;
      }
      try {
        validateTools([candidate]);
      } catch (error) {
        skipped.push(`${tool.name}: ${(error as Error).message}`);
        continue;
      }
      const owner = this.catalog.get(qualified)?.source;
      if ((owner !== undefined && owner !== this.name) || mapping.has(qualified)) {
        clashes.push(`${qualified} (${owner !== undefined && owner !== this.name ? `owned by source "${owner}"` : 'listed twice'})`);
        continue;
      }
      accepted.push(candidate as Tool);
      mapping.set(qualified, tool.name);
      if (transform) transformed.set(qualified, transform);
    }
    // With namespacing off, a key may belong to any server: only a namespaced key is known to be this server's.
    if (this.options.separator !== '') {
      for (const key of this.transforms.keys()) {
        if (!matched.has(key)) transformProblems.push(`tool "${key}": a transform is configured, but server "${this.name}" does not list this tool`);
      }
    }
    if (transformProblems.join() !== this.transformProblems.join() && transformProblems.length > 0) {
      this.log.warn({ transformProblems }, 'tool transforms do not fit the tools this upstream lists');
    }
    if (clashes.join() !== this.clashes.join() && clashes.length > 0) {
      this.log.warn({ clashes }, 'upstream tools clash with names another source owns; the first owner keeps them');
    }
    if (skipped.join() !== this.skipped.join() && skipped.length > 0) this.log.warn({ skipped }, 'upstream tools are not valid MCP tools; left out');
    this.catalog.setSource(this.name, accepted, this.name, this.about());
    this.toUpstream.clear();
    for (const [qualified, original] of mapping) this.toUpstream.set(qualified, original);
    this.transformOf.clear();
    for (const [qualified, transform] of transformed) this.transformOf.set(qualified, transform);
    this.clashes = clashes;
    this.skipped = skipped;
    this.transformProblems = transformProblems;
    this.onStatus(this.status());
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
        const tools = await this.listAll(client);
        if (generation !== this.generation) return;
        this.publish(tools);
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

  private transportError(generation: number, error: Error): void {
    if (generation !== this.generation) return;
    this.log.debug({ err: error }, 'upstream transport error');
    // The HTTP transport reports a broken event stream here and retries it a few times on its own; once it gives up,
    // notifications (list_changed) no longer arrive, so the connection is only half alive: start over.
    if (/Maximum reconnection attempts/i.test(error.message)) this.lost(generation, `event stream lost: ${error.message}`);
    else if (this.state === 'connected') void this.check(generation);
  }

  /** A ping decides whether an error was the connection dying. */
  private async check(generation: number): Promise<void> {
    const client = this.client;
    if (this.checking || generation !== this.generation || this.state !== 'connected' || !client) return;
    this.checking = true;
    try {
      const options = { timeout: Math.min(this.options.connectTimeoutMs, Math.max(this.options.pingIntervalMs, 1_000)) };
      // 2026-07-28 has no ping; server/discover is its cheapest request.
      if (client.getProtocolEra() === 'modern') await client.discover(options);
      else await client.ping(options);
    } catch (error) {
      this.lost(generation, `ping failed: ${this.describe(error)}`);
    } finally {
      this.checking = false;
    }
  }

  private schedulePing(generation: number): void {
    if (this.options.pingIntervalMs <= 0) return;
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(async () => {
      await this.check(generation);
      if (generation === this.generation && this.state === 'connected') this.schedulePing(generation);
    }, this.options.pingIntervalMs);
    this.pingTimer.unref();
  }

  /**
   * The connection is gone (or never came up): tools leave the catalog (so listings, search and the index stop offering
   * what cannot be called, and another server may take over a clashing name) but stay remembered, so a call to one
   * answers upstream_unavailable naming this server; a reconnect is scheduled.
   */
  private lost(generation: number, reason: string): void {
    if (generation !== this.generation || this.closed) return;
    this.generation++;
    clearTimeout(this.pingTimer);
    const client = this.client;
    this.client = undefined;
    const wasConnected = this.state === 'connected';
    this.state = 'down';
    this.failures++;
    const tail = this.stderrTail.length > 0 ? ` (stderr: ${this.stderrTail.slice(-3).join(' | ')})` : '';
    this.lastError = reason + tail;
    this.connectedAt = null;
    for (const name of this.toUpstream.keys()) this.remembered.add(name);
    this.toUpstream.clear();
    this.transformOf.clear();
    this.clashes = [];
    this.catalog.removeSource(this.name);
    const hadFeatures = this.features !== NO_FEATURES;
    this.features = NO_FEATURES;
    if (hadFeatures) this.onFeatures({ kind: 'lists' });
    // Closing fires onclose again; the generation check above ignores it.
    void client?.close().catch(() => {});
    const delay = backoff(this.failures, this.options.reconnect);
    this.retryAt = Date.now() + delay;
    // warn both when a live connection drops and when a connection attempt fails: either way tools are missing.
    this.log.warn({ reason: this.lastError, wasConnected, retryInMs: Math.round(delay), failures: this.failures }, 'upstream down');
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    this.retryTimer.unref();
    this.onStatus(this.status());
  }
}

/**
 * Exponential backoff from `initialMs`, doubling per consecutive failure up to `maxMs`, with jitter (the upper half of
 * the interval) so that many toolrouter instances do not hammer a recovering server in step.
 */
export function backoff(failures: number, { initialMs, maxMs }: { initialMs: number; maxMs: number }, random = Math.random): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(Math.max(failures - 1, 0), 30));
  return ceiling / 2 + (random() * ceiling) / 2;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    promise.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}
