import { EventEmitter } from 'node:events';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Catalog } from '../../catalog/catalog.js';
import { ToolrouterError } from '../../errors.js';
import { servesUri, type UpstreamFeatures } from './features.js';
import { transformServer, type ToolTransform } from './transform.js';
import { DEFAULT_MAX_RESULT_BYTES } from './bounds.js';
import { UpstreamConnection } from './connection.js';
import type { LogLevel } from '../relay/channel.js';
import { UserConnections } from './per-user.js';
import {
  UpstreamError,
  type UpstreamCallOptions,
  type UpstreamEvents,
  type UpstreamManagerOptions,
  type RemoteServerConfig,
  type UpstreamOrigin,
  type UpstreamServerConfig,
  type UpstreamStatus,
} from './types.js';

/**
 * Keeps one connection per upstream MCP server (configured, imported, or added at run time) and mirrors its tools into
 * the catalog as the source named after the server: tools enter when it connects, are re-listed on
 * `notifications/tools/list_changed`, and leave while it is down. A lost server is reconnected with capped exponential
 * backoff. Calls are routed by qualified name.
 */
export class UpstreamManager extends EventEmitter<UpstreamEvents> {
  private readonly connections = new Map<string, UpstreamConnection>();
  /** Per-user OAuth servers' connections per subject, by server; made on a subject's first call. */
  private readonly userConnections = new Map<string, UserConnections>();
  private started = false;
  /** The log level sessions want of upstreams (src/mcp/relay/levels.ts); none until a session sets one. */
  private logLevel: LogLevel | undefined;

  constructor(
    private readonly catalog: Catalog,
    private readonly options: UpstreamManagerOptions,
  ) {
    super();
    for (const [name, config] of Object.entries(options.servers)) this.open(name, config, 'config');
    for (const [name, config] of Object.entries(options.imported ?? {})) if (!this.connections.has(name)) this.open(name, config, 'import');
  }

  /** Starts connecting every server in the background; never waits for (or fails on) slow or dead upstreams. */
  start(): void {
    this.started = true;
    for (const connection of this.connections.values()) connection.start();
  }

  /** Resolves once every server has finished its first connection attempt, successful or not. */
  async settled(): Promise<void> {
    // Servers added meanwhile (runtime servers loaded at start) are waited for too.
    for (let round = 0; round < 100; round++) {
      const pending = [...this.connections.values()];
      await Promise.all(pending.map((connection) => connection.firstAttempt));
      if ([...this.connections.values()].every((connection) => pending.includes(connection))) return;
    }
  }

  status(): UpstreamStatus[] {
    return [...this.connections.values()].map((connection) => connection.status());
  }

  /** One server's status; undefined when there is no such server. */
  statusOf(name: string): UpstreamStatus | undefined {
    return this.connections.get(name)?.status();
  }

  /** The configuration a server runs with (secrets included: never hand it out unmasked). */
  configOf(name: string): { config: UpstreamServerConfig; origin: UpstreamOrigin } | undefined {
    const connection = this.connections.get(name);
    return connection && { config: connection.config, origin: connection.origin };
  }

  /**
   * Adds a server at run time, or replaces one added at run time (its connection starts over with the new settings).
   * Throws CatalogConflictError when the name is a static source, and a `conflict` for a server from the configuration,
   * which cannot be replaced (the admin route checks both first).
   */
  async put(name: string, config: UpstreamServerConfig): Promise<void> {
    const existing = this.connections.get(name);
    if (existing && existing.origin !== 'runtime') throw new ToolrouterError('conflict', `server "${name}" comes from the ${describeOrigin(existing.origin)} and cannot be changed at run time`);
    if (existing && JSON.stringify(existing.config) === JSON.stringify(config)) return;
    if (existing) await this.drop(existing);
    const connection = this.open(name, config, 'runtime');
    if (this.started) connection.start();
    this.emit('servers');
  }

  /** Removes a server added at run time: its connection closes and its tools leave the catalog. False when unknown. */
  async remove(name: string): Promise<boolean> {
    const existing = this.connections.get(name);
    if (!existing) return false;
    if (existing.origin !== 'runtime') throw new ToolrouterError('conflict', `server "${name}" comes from the ${describeOrigin(existing.origin)}; remove it there (servers from files cannot be deleted at run time)`);
    await this.drop(existing);
    this.emit('servers');
    return true;
  }

  /** Connects a server again now (admin). False when unknown. */
  reconnect(name: string): boolean {
    const connection = this.connections.get(name);
    if (!connection) return false;
    connection.reconnect();
    return true;
  }

  /**
   * Connects a server now unless it is connected or connecting: after an OAuth grant was obtained or renewed (by any
   * instance), a server waiting for one need not wait for its next retry, and a connected one is left as it is.
   */
  reconnectNow(name: string): void {
    this.connections.get(name)?.reconnectNow();
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
    return connection ? connection.unavailable() : new UpstreamError('upstream_unavailable', `upstream MCP server "${server}" is not configured`);
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

  /** The connected server (of those `visible`) with this resource template (by its URI template), or serving the URI. */
  templateOwner(uriTemplate: string, visible: (server: string) => boolean): UpstreamConnection | undefined {
    const candidates = [...this.connections.values()].filter((connection) => visible(connection.name));
    return candidates.find((connection) => connection.offered().templates.some((template) => template.uriTemplate === uriTemplate)) ?? this.resourceOwner(uriTemplate, visible);
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

  /** Forwards a call to the server owning the qualified tool name, under the upstream's own tool name. */
  async callTool(qualifiedName: string, args: Record<string, unknown> | undefined, options: UpstreamCallOptions): Promise<CallToolResult> {
    const source = this.catalog.get(qualifiedName)?.source;
    const connection = source === undefined ? undefined : this.connections.get(source);
    if (!connection) throw new UpstreamError('upstream_unavailable', `no upstream MCP server serves "${qualifiedName}"`);
    // A per-user server: a caller with a subject goes out with their own grant, never the shared one.
    if (options.subject !== undefined && 'url' in connection.config && this.options.users?.perUser(connection.name)) {
      const call = connection.upstreamCall(qualifiedName, args);
      return this.usersOf(connection).call(options.subject, call.name, call.args, options, call.taskSupport);
    }
    return connection.call(qualifiedName, args, options);
  }

  /** Tells every upstream connection (shared and per-user, present and future) the log level sessions want. */
  setLogLevel(level: LogLevel): void {
    this.logLevel = level;
    for (const connection of this.connections.values()) connection.setLogLevel(level);
    for (const users of this.userConnections.values()) users.setLogLevel(level);
  }

  /** Whether the tool's server runs it only as a task (execution.taskSupport "required" upstream): a long job. */
  requiresTask(qualifiedName: string): boolean {
    const source = this.catalog.get(qualifiedName)?.source;
    return source !== undefined && (this.connections.get(source)?.requiresTask(qualifiedName) ?? false);
  }

  /** Closes a subject's connection to a per-user server (their grant was revoked). */
  async dropUser(server: string, subject: string): Promise<void> {
    await this.userConnections.get(server)?.drop(subject);
  }

  /** Open per-user connections of a server (for its status and tests). */
  userConnectionCount(server: string): number {
    return this.userConnections.get(server)?.size ?? 0;
  }

  private usersOf(connection: UpstreamConnection): UserConnections {
    let users = this.userConnections.get(connection.name);
    if (!users) {
      users = new UserConnections(connection.name, connection.config as RemoteServerConfig, {
        grants: this.options.users!,
        max: this.options.userConnections?.max ?? 64,
        idleMs: this.options.userConnections?.idleMs ?? 300_000,
        connectTimeoutMs: this.options.connectTimeoutMs,
        maxResultBytes: this.options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES,
        log: this.options.log.child({ upstream: connection.name, perUser: true }),
      });
      if (this.logLevel !== undefined) users.setLogLevel(this.logLevel);
      this.userConnections.set(connection.name, users);
    }
    return users;
  }

  async close(): Promise<void> {
    await Promise.all([...this.userConnections.values()].map((users) => users.close()));
    this.userConnections.clear();
    await Promise.all([...this.connections.values()].map((connection) => connection.close()));
  }

  private qualify(server: string, name: string): string {
    return this.options.separator === '' ? name : `${server}${this.options.separator}${name}`;
  }

  private open(name: string, config: UpstreamServerConfig, origin: UpstreamOrigin): UpstreamConnection {
    // Reserved for good while the server exists: while it is down its name must not be taken by a static source either.
    this.catalog.reserveSource(name, owner(name));
    const connection = new UpstreamConnection(
      name,
      config,
      origin,
      this.catalog,
      {
        separator: this.options.separator,
        reconnect: this.options.reconnect,
        connectTimeoutMs: this.options.connectTimeoutMs,
        pingIntervalMs: this.options.pingIntervalMs,
        maxResultBytes: this.options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES,
        transforms: this.transformsOf(name),
        auth: 'url' in config ? this.options.auth?.(name) : undefined,
        log: this.options.log,
      },
      (status) => {
        this.emit('status', status);
        // Clashing tools of other servers may take over the names this one just gave up.
        if (status.state === 'down' || status.state === 'needs_authorization') for (const other of this.connections.values()) if (other !== connection) other.republish();
      },
      (change) => this.emit('features', name, change),
    );
    if (this.logLevel !== undefined) connection.setLogLevel(this.logLevel);
    this.connections.set(name, connection);
    return connection;
  }

  private async drop(connection: UpstreamConnection): Promise<void> {
    this.connections.delete(connection.name);
    await this.userConnections.get(connection.name)?.close();
    this.userConnections.delete(connection.name);
    await connection.close(true);
    this.catalog.releaseSource(connection.name, owner(connection.name));
    this.emit('status', { ...connection.status(), tools: 0 });
    for (const other of this.connections.values()) other.republish();
  }

  /** The transforms keyed under this server's prefix (all of them when names are not namespaced). */
  private transformsOf(name: string): Map<string, ToolTransform> {
    const servers = [...new Set([...Object.keys(this.options.servers), ...Object.keys(this.options.imported ?? {}), ...this.connections.keys(), name])];
    const separator = this.options.separator;
    return new Map(Object.entries(this.options.transforms ?? {}).filter(([key]) => separator === '' || transformServer(key, servers, separator) === name));
  }
}

function owner(name: string): string {
  return `upstream MCP server "${name}"`;
}

function describeOrigin(origin: UpstreamOrigin): string {
  return origin === 'config' ? 'configuration file (mcp.servers)' : 'an imported MCP client config (mcp.import / --mcp-config)';
}
