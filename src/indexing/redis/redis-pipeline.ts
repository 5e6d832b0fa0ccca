import { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { CatalogSnapshot } from '../../catalog/catalog.js';
import { encodeSnapshot } from '../../catalog/snapshot-codec.js';
import type { RedisClient, RedisKeys } from '../../redis/connection.js';
import type { RedisBus } from '../../redis/bus.js';
import { deserializeIndex } from '../artifact.js';
import type { LexicalSettings } from '../lexical.js';
import type { IndexManager, IndexPipeline } from '../manager.js';
import { ArtifactStore, type IndexEvent } from './artifact-store.js';
import type { BuildJobData } from './build-job.js';
import { DEFAULT_RETENTION, registerAndTrim, type Retention } from './retention.js';
import { jobTraceContext } from '../../telemetry/spans.js';

export interface RedisPipelineOptions {
  /** The process's Redis bus: its command connection also carries the BullMQ queue, its subscriber the swap events. */
  bus: RedisBus;
  model: string;
  separator: string;
  lexical: LexicalSettings;
  log: Logger;
  job: { attempts: number; backoffMs: number };
  /** Snapshots and indexes kept in Redis (queue.retention); default DEFAULT_RETENTION. */
  retention?: Retention;
  /** How often the stalled-job check runs (queue.stalledIntervalMs): when a job whose worker died is retried. */
  stalledIntervalMs?: number;
}

/** Why the index is not yet built for the current catalog, as far as the queue can tell (GET /v1/index/status). */
export interface BuildWait {
  job: string;
  reason: string;
  /** When the build is expected to be (re)tried, ISO 8601. */
  retryAt?: string;
}

/**
 * Raises the catalog version counter to at least ARGV[1]: versions must not go back after Redis lost its data.
 * Slot: one key (catalog:version).
 */
const RAISE_VERSION = `
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`;

/**
 * The shared pipeline: the API publishes each new catalog snapshot and enqueues a build (job id = catalog hash, so
 * instances asking for the same catalog collapse into one job); workers build; every instance hears the swap and
 * loads the same artifact. Until then searches are served by the index already loaded.
 */
export class RedisIndexPipeline implements IndexPipeline {
  private readonly queue: Queue<BuildJobData>;
  private readonly store: ArtifactStore;
  private readonly waiters = new Set<() => void>();
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;
  private closed = false;

  constructor(
    private readonly manager: IndexManager,
    private readonly options: RedisPipelineOptions,
  ) {
    this.redis = options.bus.redis;
    this.keys = options.bus.keys;
    this.store = new ArtifactStore(this.redis, this.keys, options.model, options.retention);
    // A Queue only adds and reads jobs (no blocking commands), so BullMQ takes the shared connection as it is and leaves
    // it open on close. "Index built" reaches the API as an event on the bus (ArtifactStore.publish), not through
    // QueueEvents, which would need a blocking connection of its own.
    this.queue = new Queue<BuildJobData>(this.keys.indexQueue, { connection: this.redis, prefix: this.keys.bullPrefix });
    this.queue.on('error', (error) => options.log.warn({ err: error }, 'index queue error'));
    manager.on('swapped', () => this.wake());
    manager.on('failed', () => this.wake());
  }

  /**
   * Subscribes to swaps and loads the index Redis already points at, so a restarted instance serves at once. After a
   * reconnect the pointer is read again (a swap announced meanwhile is lost; installs only go forward, so reading an
   * index already live changes nothing), and after Redis lost its data the build of this instance's catalog is asked
   * for again.
   */
  async start(): Promise<void> {
    const { model, log } = this.options;
    await this.options.bus.listen(this.keys.indexChannel(model), {
      message: (text) => {
        void this.onEvent(JSON.parse(text) as IndexEvent).catch((error: unknown) => log.error({ err: error }, 'could not apply index event'));
      },
      resync: () => this.loadPointer(),
      restore: () => this.resync(),
    });
    await this.loadPointer();
  }

  async update(snapshot: CatalogSnapshot): Promise<void> {
    this.manager.setTarget(snapshot);
    if (this.manager.current?.catalogHash === snapshot.catalogHash) return;
    await this.manager.track(this.requestWithRetry(snapshot, false));
  }

  /**
   * Redis lost its data (the generation marker changed): the queued job, the stored snapshot and index are gone. Keeps
   * catalog versions moving forward past what this instance has seen, and asks again for the index of its catalog, so
   * every instance ends on one catalog and one index built for it.
   */
  async resync(): Promise<void> {
    if (Number.isFinite(this.manager.version)) {
      await this.redis.eval(RAISE_VERSION, 1, this.keys.catalogVersion, String(this.manager.version));
    }
    void this.manager.track(this.requestWithRetry(this.manager.target, false));
  }

  /** Why the current catalog's index is not live yet; undefined when it is, or when nothing is queued for it. */
  async buildWait(): Promise<BuildWait | undefined> {
    const target = this.manager.target.catalogHash;
    // Commands would wait out an outage; the status answers without a reason instead.
    if (this.manager.current?.catalogHash === target || this.redis.status !== 'ready') return undefined;
    const job = await this.queue.getJob(target);
    if (!job?.id) return undefined;
    const state = await job.getState();
    if (state === 'active') {
      const lockMs = await this.redis.pttl(`${this.queue.toKey(job.id)}:lock`);
      const stalledMs = this.options.stalledIntervalMs ?? 30_000;
      if (lockMs < 0) {
        return {
          job: job.id,
          reason: 'the worker building it stopped renewing its lock (it died or hangs); the stalled-job check hands it to another worker',
          retryAt: new Date(Date.now() + stalledMs).toISOString(),
        };
      }
      return {
        job: job.id,
        reason: `building on a worker (attempt ${job.attemptsMade + 1}); if that worker died, its lock expires in ${Math.ceil(lockMs / 1000)} s and the job is retried`,
        retryAt: new Date(Date.now() + lockMs + stalledMs).toISOString(),
      };
    }
    if (state === 'delayed') {
      const retryAt = job.timestamp + (job.delay ?? 0);
      return { job: job.id, reason: `waiting to retry after a failed attempt (${job.attemptsMade} so far): ${job.failedReason ?? 'unknown error'}`, retryAt: new Date(retryAt).toISOString() };
    }
    if (state === 'waiting' || state === 'prioritized' || state === 'waiting-children') {
      const workers = await this.queue.getWorkersCount();
      return { job: job.id, reason: workers === 0 ? 'queued, but no index worker is connected to the queue' : `queued for one of ${workers} workers` };
    }
    return { job: job.id, reason: `job is ${state}` };
  }

  async rebuild(): Promise<void> {
    this.manager.clearFailure();
    await this.manager.track(this.requestWithRetry(this.manager.target, true));
  }

  /** Resolves when the index for the current catalog is live, or its build failed. */
  async idle(): Promise<void> {
    while (!this.closed && !this.settled()) await new Promise<void>((resolve) => this.waiters.add(resolve));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake();
    await this.queue.close();
  }

  /**
   * Redis may be away when the catalog changes; searches go on from the loaded index, the error shows in status, and
   * the request is repeated (with backoff) until it goes through or a newer catalog replaces it.
   */
  private async requestWithRetry(snapshot: CatalogSnapshot, force: boolean): Promise<void> {
    for (let attempt = 0; !this.closed && this.manager.target.catalogHash === snapshot.catalogHash; attempt++) {
      try {
        await this.request(snapshot, force);
        return;
      } catch (error) {
        const message = `could not queue the index build: ${error instanceof Error ? error.message : String(error)}`;
        this.manager.reportError(message);
        this.options.log.warn({ catalogHash: snapshot.catalogHash, attempt }, message);
        await new Promise((resolve) => setTimeout(resolve, Math.min(500 * 2 ** attempt, 30_000)).unref());
      }
    }
  }

  private settled(): boolean {
    const target = this.manager.target.catalogHash;
    return this.manager.current?.catalogHash === target || this.manager.failedFor(target);
  }

  private wake(): void {
    for (const resolve of this.waiters) resolve();
    this.waiters.clear();
  }

  /**
   * Publishes the snapshot under a new catalog version and asks for it to be indexed. An artifact that already exists
   * (the catalog changed back, or another instance got there first) is promoted without a build.
   */
  private async request(snapshot: CatalogSnapshot, force: boolean): Promise<void> {
    const { redis, keys } = this;
    const { model, separator, job } = this.options;
    const version = await redis.incr(keys.catalogVersion);
    await redis
      .multi()
      .set(keys.catalogSnapshot(snapshot.catalogHash), encodeSnapshot(snapshot, separator), 'EX', 24 * 3600)
      .set(keys.catalogLatest, JSON.stringify({ hash: snapshot.catalogHash, version }))
      .exec();
    const retention = this.options.retention ?? DEFAULT_RETENTION;
    await registerAndTrim(
      redis,
      { registry: keys.catalogSnapshots, prefix: keys.catalogSnapshot('') },
      { hash: snapshot.catalogHash, version },
      // The live index's snapshot stays: a rollback, or a worker re-running its build, needs it.
      { keep: retention.snapshots, maxBytes: retention.snapshotBytes, protectedHash: this.manager.current?.catalogHash },
    );
    if (!force && (await this.store.has(snapshot.catalogHash))) {
      await this.store.promote(snapshot.catalogHash, version, new Date().toISOString());
    } else {
      await this.queue.add(
        'build',
        { catalogHash: snapshot.catalogHash, version, model, ...(force ? { force } : {}), ...jobTraceContext() },
        {
          // A forced rebuild must not collapse into a finished job for the same catalog.
          jobId: force ? `${snapshot.catalogHash}-rebuild-${version}` : snapshot.catalogHash,
          attempts: job.attempts,
          backoff: { type: 'exponential', delay: job.backoffMs },
          removeOnComplete: true,
          removeOnFail: true,
        },
      );
    }
    await this.idleFor(snapshot.catalogHash);
  }

  /** Waits until this snapshot is live, failed, or no longer the one wanted. */
  private async idleFor(catalogHash: string): Promise<void> {
    while (!this.closed && this.manager.target.catalogHash === catalogHash && !this.settled()) {
      await new Promise<void>((resolve) => this.waiters.add(resolve));
    }
  }

  private async onEvent(event: IndexEvent): Promise<void> {
    if (event.type === 'swapped') {
      await this.load(event.hash, event.version);
    } else if (event.type === 'failed') {
      if (event.final) this.manager.recordFailure(event.hash, new Error(event.error));
      else this.manager.reportError(event.error);
    } else {
      this.wake();
    }
  }

  private async loadPointer(): Promise<void> {
    const pointer = await this.store.pointer();
    if (pointer) await this.load(pointer.hash, pointer.version);
    // A build's "failed" or "superseded" may have been missed too: whoever waits looks at the state again.
    this.wake();
  }

  private async load(catalogHash: string, version: number): Promise<void> {
    const artifact = await this.store.get(catalogHash);
    if (!artifact) {
      this.options.log.warn({ catalogHash }, 'index pointer names an artifact that is gone; waiting for a rebuild');
      return;
    }
    const index = await deserializeIndex(artifact, this.options.lexical);
    // The index of the very catalog this instance wants is never stale, even when its version number is lower: a
    // Redis restarted without persistence counts versions from 1 again.
    const effective = catalogHash === this.manager.target.catalogHash ? Math.max(version, this.manager.version) : version;
    if (this.manager.install(index, effective)) {
      this.options.log.info({ catalogHash, version, tools: index.size }, 'index swapped');
    }
  }
}
