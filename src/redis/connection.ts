import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { ToolrouterError } from '../errors.js';
import { redisForm, type RedisSettings } from './settings.js';

/** A connection to one Redis (directly or found through Sentinel) or to a Redis Cluster: the stores take either. */
export type RedisClient = Redis | Cluster;

/**
 * Every Redis key and channel toolrouter uses, under one prefix so several deployments (or test runs) can share a
 * Redis without seeing each other.
 *
 * Hash slots: on a Redis Cluster the prefix is wrapped in braces (`{toolrouter}:catalog:...`), a hash tag that puts
 * every key of the deployment in one slot, so every MULTI, MGET and Lua script (each names the keys it touches) runs
 * on one node, as they do on a single Redis. On one node and under Sentinel the prefix stays as it is (`toolrouter:...`):
 * a single Redis has no slots, and keeping the names means an upgrade reads the data already stored. So a new key must
 * start with `this.prefix` (or go through `key()`), never with the bare `name`; channels follow the same rule (they
 * are not slotted under classic pub/sub, but one rule is easier to keep).
 */
export class RedisKeys {
  /** What every key and channel starts with: `name`, or `{name}` on a cluster. */
  readonly prefix: string;

  constructor(
    /** The deployment's name (queue.prefix). */
    readonly name: string,
    options: { hashTag?: boolean } = {},
  ) {
    // A name that already carries a tag (`{tr}`) is used as given.
    this.prefix = options.hashTag && !/\{[^}]+\}/.test(name) ? `{${name}}` : name;
  }

  /** The keys of deployment `name` on this Redis: hash-tagged when it is a cluster. */
  static of(name: string, settings: RedisSettings): RedisKeys {
    return new RedisKeys(name, { hashTag: redisForm(settings) === 'cluster' });
  }

  /** A key of this deployment: `<prefix>:<part>:<part>...`, in the deployment's hash slot on a cluster. */
  key(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }

  /**
   * BullMQ's key prefix (its keys are `<bullPrefix>:<indexQueue>:...`, and its scripts span them): BullMQ's default
   * `bull` on one node, as before; `bull:{name}` on a cluster, the hash tag BullMQ's documentation asks for.
   */
  get bullPrefix(): string {
    return this.prefix === this.name ? 'bull' : `bull:${this.prefix}`;
  }

  /** BullMQ queue of index builds (BullMQ adds its own `bull:` prefix, so the name carries ours). */
  get indexQueue(): string {
    return `${this.name}-index`;
  }
  catalogSnapshot(catalogHash: string): string {
    return `${this.prefix}:catalog:${catalogHash}`;
  }
  /** Sorted set of stored snapshots (catalog hash by version), for retention. */
  get catalogSnapshots(): string {
    return `${this.prefix}:catalog:snapshots`;
  }
  /** Sorted set of promoted index artifacts of a model (catalog hash by version), for retention. */
  artifacts(model: string): string {
    return `${this.prefix}:index:${model}:artifacts`;
  }
  /**
   * A random id written once into an empty Redis: when it disappears or changes, Redis lost its data (restarted without
   * persistence, flushed) and every instance re-announces what it holds.
   */
  get generation(): string {
    return `${this.prefix}:generation`;
  }
  /** Counter giving every published catalog snapshot a version, across all API instances. */
  get catalogVersion(): string {
    return `${this.prefix}:catalog:version`;
  }
  /** `{hash, version}` of the newest snapshot any instance asked to index. */
  get catalogLatest(): string {
    return `${this.prefix}:catalog:latest`;
  }
  artifact(model: string, catalogHash: string): string {
    return `${this.prefix}:index:${model}:${catalogHash}`;
  }
  /** `{hash, version, builtAt}` of the index every instance should serve for this model. */
  indexPointer(model: string): string {
    return `${this.prefix}:index:${model}:current`;
  }
  indexChannel(model: string): string {
    return `${this.prefix}:index:${model}:events`;
  }
  embedding(model: string, textHash: string): string {
    return `${this.prefix}:emb:${model}:${textHash}`;
  }
  /** Virtual API keys: secret hash → key record. */
  get apiKeys(): string {
    return `${this.prefix}:keys`;
  }
  /** Prefix of rate-limit counters (rate-limiter-flexible adds the limited key after it). */
  rateLimit(kind: string): string {
    return `${this.prefix}:ratelimit:${kind}`;
  }
  get staticSources(): string {
    return `${this.prefix}:sources`;
  }
  get staticSourcesChannel(): string {
    return `${this.prefix}:sources:events`;
  }
  /** Feedback events (src/feedback): a sorted set scored by time, and the channel announcing each append. */
  get feedbackEvents(): string {
    return `${this.prefix}:feedback:events`;
  }
  get feedbackChannel(): string {
    return `${this.prefix}:feedback:channel`;
  }
  /** Search defaults applied at run time (`PUT /v1/search/settings`), shared by every API instance. */
  get searchSettings(): string {
    return `${this.prefix}:search:settings`;
  }
  /** Counter ordering applied search defaults, so an instance never goes back to an older one. */
  get searchSettingsVersion(): string {
    return `${this.prefix}:search:settings:version`;
  }
  get searchSettingsChannel(): string {
    return `${this.prefix}:search:settings:events`;
  }
  /** Upstream MCP servers added at run time (`PUT /v1/mcp/servers/:name`): name → config JSON, and their channel. */
  get mcpServers(): string {
    return `${this.prefix}:mcp:servers`;
  }
  get mcpServersChannel(): string {
    return `${this.prefix}:mcp:servers:events`;
  }
  /** An upstream MCP server's OAuth record (client registration, tokens), sealed with TOOLROUTER_SECRET_KEY. */
  oauthServer(server: string): string {
    return `${this.prefix}:oauth:server:${server}`;
  }
  /**
   * The members of a family of OAuth records (a per-user server's grants, `<server>:user`): a set of the last segment
   * of each record's name, written in the same MULTI as the record (src/mcp/upstream/oauth/store.ts).
   */
  oauthIndex(family: string): string {
    return `${this.prefix}:oauth:index:${family}`;
  }
  /** An authorization in progress (PKCE verifier), by its `state`; expires with the browser step's deadline. */
  oauthPending(state: string): string {
    return `${this.prefix}:oauth:pending:${state}`;
  }
  /** Held by the instance refreshing a server's tokens (see src/mcp/upstream/oauth/store.ts). */
  oauthLock(server: string): string {
    return `${this.prefix}:oauth:lock:${server}`;
  }
  /** Announces that a server's OAuth record changed (authorized, refreshed, revoked). */
  /** An API instance's heartbeat (src/state/redis/instances.ts): present while the instance is up, short TTL. */
  instance(id: string): string {
    return `${this.prefix}:instance:${id}`;
  }
  /** Messages to one API instance (task cancellation and answers, round resumptions, replies). */
  instanceChannel(id: string): string {
    return `${this.prefix}:instance:${id}:inbox`;
  }
  /** A task's record (src/state/redis/tasks.ts). */
  task(taskId: string): string {
    return `${this.prefix}:task:${taskId}`;
  }
  /** What a 2025 background task's upstream asked or logged, queued for the client's tasks/result (a list). */
  taskMessages(taskId: string): string {
    return `${this.prefix}:task:${taskId}:messages`;
  }
  /** Sorted set of one owner's task ids (by expiry); the owner is hashed, it may be a subject. */
  taskOwner(ownerHash: string): string {
    return `${this.prefix}:tasks:owner:${ownerHash}`;
  }
  /** Sorted set of every task id (by expiry), for the total bound. */
  get tasksAll(): string {
    return `${this.prefix}:tasks:all`;
  }
  /** The secret every instance signs 2026-07-28 requestState with (src/state/redis/rounds.ts). */
  get roundsSecret(): string {
    return `${this.prefix}:rounds:secret`;
  }
  get oauthChannel(): string {
    return `${this.prefix}:oauth:events`;
  }
  /** A chat conversation turn's forwarded tools (src/state/redis/conversations.ts), by a hash of history and answer. */
  conversationSelection(id: string): string {
    return `${this.prefix}:conv:sel:${id}`;
  }
  /** A chat conversation turn's ranked tools not yet seen called, with its query and scope (feedback). */
  conversationTurn(id: string): string {
    return `${this.prefix}:conv:turn:${id}`;
  }
  /** An MCP search (src/state/redis/searches.ts): query, tools found, tools already credited. */
  search(id: string): string {
    return `${this.prefix}:searches:id:${id}`;
  }
  /** The recent search ids of one caller scope (stateless requests) or one 2025 session, newest first. */
  searchHistory(kind: 'scope' | 'session', id: string): string {
    return `${this.prefix}:searches:${kind}:${id}`;
  }
  /** A 2025-era MCP session's record (src/state/redis/sessions.ts), expiring after the session's idle timeout. */
  mcpSession(id: string): string {
    return `${this.prefix}:mcp:session:${id}`;
  }
  /** Sorted set of one holder's sessions (member: id, score: expiry in ms), for the per-key cap across instances. */
  mcpSessionHolder(holder: string): string {
    return `${this.prefix}:mcp:sessions:holder:${holder}`;
  }
  /** Session messages between instances: a session ended, a notification for the instance holding its GET stream. */
  get mcpSessionChannel(): string {
    return `${this.prefix}:mcp:sessions:events`;
  }
}

/**
 * Redis could not be reached: the request failed. `sent: false` (the default) means the command never left this
 * process, so nothing was changed; `sent: true` means it went out and no answer came in time, so Redis may still apply
 * it when it comes back (every toolrouter write stores a whole value, so repeating the request is safe). Redis's own
 * error text (an OOM refusal, a connection error naming hosts) stays in `cause`, for the log: clients read only the
 * message, which says what failed and that retrying is safe.
 */
export class RedisUnavailableError extends ToolrouterError {
  override readonly name = 'RedisUnavailableError';

  constructor(action: string, cause: unknown, options: { sent?: boolean } = {}) {
    super(
      'redis_unavailable',
      options.sent
        ? `Redis did not answer in time, so ${action} may not have been applied (it may still be, once Redis answers; repeating the request is safe)`
        : `Redis is unavailable, so ${action} failed and nothing was changed; retry later`,
      { cause },
    );
  }
}

/**
 * Whether an error (or a message) is Redis's or ioredis's own: a reply error (`OOM …`, `READONLY …`, `ERR …`) or a
 * connection failure as ioredis words it. Such text names Redis internals and never goes to a client: the faces
 * answer it as redis_unavailable (retryable) instead.
 */
export function isRedisErrorText(error: unknown): boolean {
  if (error instanceof RedisUnavailableError) return true;
  const { name, message } = error instanceof Error ? error : { name: '', message: typeof error === 'string' ? error : '' };
  if (name === 'ReplyError' || name === 'MaxRetriesPerRequestError' || name === 'ClusterAllFailedError') return true;
  return REDIS_TEXT.test(message);
}

const REDIS_TEXT =
  /^(OOM|READONLY|LOADING|BUSY|MASTERDOWN|MISCONF|NOSCRIPT|WRONGTYPE|EXECABORT|CLUSTERDOWN|TRYAGAIN|CROSSSLOT|NOAUTH|WRONGPASS|NOREPLICAS) |^ERR |Connection is closed|Stream isn't writeable|enableOfflineQueue|max retries per request|All sentinels are unreachable|Too many Cluster redirections|Failed to refresh slots cache|maxmemory/;

/** What a client reads instead of Redis's own error text. */
export const REDIS_UNAVAILABLE_MESSAGE = 'the shared state store (Redis) is unavailable for a moment; nothing was lost, retry later';

/** Runs a Redis command, turning connection failures into RedisUnavailableError. */
export async function withRedis<T>(action: string, command: () => Promise<T>): Promise<T> {
  try {
    return await command();
  } catch (error) {
    throw new RedisUnavailableError(action, error);
  }
}

/** What a gate asks before sending: RedisHealth (src/redis/health.ts) in the API. */
export interface RedisUsability {
  readonly usable: boolean;
  readonly lastCheck: { ok: boolean; detail?: string };
  /** Probes again (a failed command may be the first sign of an outage). */
  check(): Promise<unknown>;
}

export interface RedisGateOptions {
  /** How long a command may take before the caller hears 503 (security.redisTimeoutMs, redis.commandTimeoutMs). */
  timeoutMs: number;
  /** How long after a failure commands are refused without trying; 0: only while the connection or probe says so. */
  cooldownMs: number;
  /** The probe of the slot toolrouter writes to: while it fails, commands are refused. */
  health?: RedisUsability;
  /**
   * Writes: while Redis is away, wait (within `timeoutMs`) for it to come back before refusing, so a reconnect or a
   * failover shorter than the budget costs a delay, not a 503. Lookups leave it off: they have an in-memory fallback
   * and must not wait.
   */
  waitWhileAway?: boolean;
}

/**
 * Guards commands on a request's path (key lookups, rate counters, catalog and key writes) so a Redis outage costs a
 * request at most one timeout, not ioredis's reconnect retries (5-15 s while Redis is down, or a cluster's redirections
 * while the node serving the slot is gone): while the connection is not ready, the probe fails, or for `cooldownMs`
 * after a command failed or timed out, commands are refused at once (nothing is sent) and callers answer 503 or use
 * their in-memory fallbacks.
 */
export class RedisGate {
  private openUntil = 0;

  constructor(
    readonly redis: RedisClient,
    private readonly options: RedisGateOptions,
  ) {}

  /** False while the connection is down or recently failed: callers should not even try. */
  get available(): boolean {
    return this.redis.status === 'ready' && Date.now() >= this.openUntil && (this.options.health?.usable ?? true);
  }

  /** Runs a command within the timeout; throws RedisUnavailableError at once when Redis is known to be away. */
  async run<T>(action: string, command: (redis: RedisClient) => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.options.timeoutMs;
    if (!this.available && this.options.waitWhileAway) await this.untilAvailable(deadline);
    if (!this.available) throw new RedisUnavailableError(action, new Error(this.whyUnavailable()));
    const budgetMs = Math.max(deadline - Date.now(), 1);
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    try {
      return await Promise.race([
        command(this.redis),
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => {
            timedOut = true;
            reject(new Error(`no answer within ${this.options.timeoutMs} ms`));
          }, budgetMs);
        }),
      ]);
    } catch (error) {
      this.openUntil = Date.now() + this.options.cooldownMs;
      void this.options.health?.check();
      // An error from Redis or ioredis (refused, dropped from the offline queue, too many redirections) means the write
      // did not happen; only a timeout leaves it in flight.
      throw new RedisUnavailableError(action, error, { sent: timedOut });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Polls (the connection's and the probe's state change without one event to wait on) until available or `deadline`. */
  private async untilAvailable(deadline: number): Promise<void> {
    while (!this.available && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(deadline - Date.now(), 1))));
    }
  }

  private whyUnavailable(): string {
    if (this.redis.status !== 'ready') return `connection ${this.redis.status}`;
    const health = this.options.health;
    if (health && !health.usable) return health.lastCheck.detail ?? 'the node serving toolrouter\'s keys is not connected';
    return 'a command failed moments ago';
  }
}

/** How a connection behaves when Redis is away; BullMQ's Worker overrides `maxRetriesPerRequest` (it must be null). */
export interface ConnectOptions {
  maxRetriesPerRequest?: number | null;
}

/**
 * A Redis connection that fails commands fast while Redis is away (instead of queueing them forever) and keeps
 * reconnecting in the background, so a request during an outage gets an error, not a hang. The same for the three
 * forms: a Sentinel failover and a cluster's moved slots are reconnects ioredis follows on its own.
 */
export function connectRedis(settings: RedisSettings, name: string, log?: Logger, options: ConnectOptions = {}): RedisClient {
  const redis = openConnection(settings, name, options);
  // Without a listener ioredis prints every failed reconnect; one line per outage is enough.
  let down = false;
  redis.on('error', (error) => {
    if (!down) log?.warn({ err: error, connection: name }, 'Redis connection lost; reconnecting');
    down = true;
  });
  redis.on('ready', () => {
    if (down) log?.info({ connection: name }, 'Redis connection restored');
    down = false;
  });
  if (redis instanceof Redis && redisForm(settings) === 'sentinel') reviveAfterEnd(redis, name, log);
  return redis;
}

/**
 * ioredis's Sentinel failover detector closes the connector on +switch-master even while the connection is reconnecting
 * through Sentinel; the reconnect then fails with "Connection is closed" and ioredis ends the connection for good
 * (status `end`, no retry). Seen on a subscriber after a master was killed: the API never heard another index swap.
 * A connection that ends without this process closing it is connected again (the bus renews its subscriptions and
 * re-reads the state on 'ready', as after any reconnect).
 */
function reviveAfterEnd(redis: Redis, name: string, log?: Logger): void {
  let closedHere = false;
  const disconnect = redis.disconnect.bind(redis);
  redis.disconnect = (reconnect?: boolean) => {
    if (!reconnect) closedHere = true;
    disconnect(reconnect);
  };
  const quit = redis.quit.bind(redis);
  redis.quit = ((...args: Parameters<typeof quit>) => {
    closedHere = true;
    return quit(...args);
  }) as typeof redis.quit;
  redis.on('end', () => {
    if (closedHere) return;
    log?.warn({ connection: name }, 'Redis connection ended during a Sentinel failover; connecting again');
    setTimeout(() => {
      if (!closedHere && redis.status === 'end') redis.connect().catch(() => {});
    }, 200).unref();
  });
}

function openConnection(settings: RedisSettings, name: string, options: ConnectOptions): RedisClient {
  const common: RedisOptions = {
    connectionName: name,
    maxRetriesPerRequest: options.maxRetriesPerRequest === undefined ? 2 : options.maxRetriesPerRequest,
    // Subscriptions are renewed by RedisBus (src/redis/bus.ts), which also re-reads what was missed: ioredis's own
    // renewal leaves its promise unhandled, and a connection closed at that moment (Redis restarting while an instance
    // shuts down) would crash the process.
    autoResubscribe: false,
  };
  // A master demoted to replica (a Sentinel failover, a managed service's switchover behind one address) answers
  // writes with READONLY: reconnect (Sentinel names the new master; DNS the new address) and send the command again.
  const followFailover = { reconnectOnError: (error: Error) => (error.message.startsWith('READONLY') ? 2 : false) } as const;
  const retryStrategy = (attempt: number) => Math.min(100 * 2 ** attempt, 5_000);
  const tls = tlsOptions(settings);
  const form = redisForm(settings);
  if (form === 'cluster') {
    const nodes = settings.cluster!.nodes.map((url) => new URL(url));
    const first = nodes[0]!;
    const overTls = tls !== undefined || first.protocol === 'rediss:';
    const clusterOptions: ClusterOptions = {
      enableOfflineQueue: true,
      // ioredis resolves node host names to IPs before connecting, and a certificate names the host, not its IP: over
      // TLS connect by name (ioredis's advice for ElastiCache and other managed clusters with TLS).
      ...(overTls ? { dnsLookup: (address: string, callback: (error: null, address: string) => void) => callback(null, address) } : {}),
      clusterRetryStrategy: retryStrategy,
      redisOptions: {
        ...common,
        ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
        ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
        ...(overTls ? { tls: tls ?? {} } : {}),
      },
    };
    return new Cluster(
      nodes.map((url) => ({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 6379) })),
      clusterOptions,
    );
  }
  if (form === 'sentinel') {
    const sentinel = settings.sentinel!;
    return new Redis({
      ...common,
      ...followFailover,
      enableOfflineQueue: true,
      retryStrategy,
      sentinels: sentinel.sentinels.map((address) => {
        const at = address.lastIndexOf(':');
        return { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
      }),
      name: sentinel.name,
      ...(sentinel.username ? { username: sentinel.username } : {}),
      ...(sentinel.password ? { password: sentinel.password } : {}),
      ...(sentinel.sentinelUsername ? { sentinelUsername: sentinel.sentinelUsername } : {}),
      ...(sentinel.sentinelPassword ? { sentinelPassword: sentinel.sentinelPassword } : {}),
      ...(sentinel.db !== undefined ? { db: sentinel.db } : {}),
      // TLS reaches the master and the sentinels alike (managed Sentinel setups terminate TLS on both).
      ...(tls ? { tls, sentinelTLS: tls, enableTLSForSentinelMode: true } : {}),
      // Sentinel's failover notice (+switch-master) moves this connection to the new master at once, not on its next
      // failed command (a subscriber has none: it would stay on the demoted master). See reviveAfterEnd for its race.
      failoverDetector: true,
      sentinelRetryStrategy: retryStrategy,
    });
  }
  if (form === 'url') {
    // rediss:// alone turns TLS on with the system's CAs; `redis.tls` adds a private CA, a client certificate, SNI.
    return new Redis(settings.url!, { ...common, ...followFailover, enableOfflineQueue: true, retryStrategy, ...(tls ? { tls } : {}) });
  }
  throw new Error('no Redis configured: set redis.url, redis.sentinel or redis.cluster (or REDIS_URL)');
}

/** `redis.tls`, with the files read; a file that cannot be read is named with its setting. */
function tlsOptions(settings: RedisSettings): ConnectionOptions | undefined {
  const tls = settings.tls;
  if (!tls) return undefined;
  const read = (field: 'ca' | 'cert' | 'key') => {
    const file = tls[field];
    if (file === undefined) return {};
    try {
      return { [field]: readFileSync(file) };
    } catch (error) {
      throw new Error(`redis.tls.${field}: cannot read ${file}: ${(error as Error).message}`, { cause: error });
    }
  };
  return { ...read('ca'), ...read('cert'), ...read('key'), ...(tls.servername ? { servername: tls.servername } : {}) };
}

/** Where Redis is, without passwords, for messages and `config check`: `Redis Cluster via redis://a:7000, ...`. */
export function describeRedis(settings: RedisSettings): string {
  const mask = (url: string) => url.replace(/\/\/([^@/]*)@/, (_match, auth: string) => `//${auth.includes(':') ? `${auth.slice(0, auth.indexOf(':'))}:***` : '***'}@`);
  const tls = settings.tls ? ' over TLS' : '';
  switch (redisForm(settings)) {
    case 'cluster':
      return `Redis Cluster via ${settings.cluster!.nodes.map(mask).join(', ')}${tls}`;
    case 'sentinel':
      return `Redis master "${settings.sentinel!.name}" via Sentinel ${settings.sentinel!.sentinels.join(', ')}${tls}`;
    case 'url':
      return `Redis at ${mask(settings.url!)}${tls}`;
    default:
      return 'no Redis (in-process index, keys and settings)';
  }
}
