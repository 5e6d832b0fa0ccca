import type { Logger } from 'pino';
import { z } from 'zod';
import type { RedisClient, RedisKeys } from '../redis/connection.js';
import type { RedisBus } from '../redis/bus.js';
import type { FusionMethod, FusionWeights } from './fusion.js';
import type { SearchService } from './search.js';
import { ToolrouterError } from '../errors.js';
import { FUSION_METHODS, fusionMethodSchema, mergeWeights, weightSchema } from './weights.js';

/** The part of the search defaults an operator may change at run time. */
export interface FusionDefaults {
  weights: FusionWeights;
  fusion: FusionMethod;
}

export interface FusionDefaultsState extends FusionDefaults {
  /** `config`: as configured; `applied`: changed at run time by `PUT /v1/search/settings`. */
  source: 'config' | 'applied';
  appliedAt: string | null;
  /** What `DELETE /v1/search/settings` goes back to. */
  configured: FusionDefaults;
  /** Whether a change reaches every API instance (through Redis) or only this process. */
  scope: 'cluster' | 'instance';
}

/** Applies fusion defaults to the running SearchService, and (with Redis) to every other API instance. */
export interface SearchDefaults {
  state(): FusionDefaultsState;
  apply(defaults: FusionDefaults): Promise<FusionDefaultsState>;
  /** Back to the configured defaults. */
  reset(): Promise<FusionDefaultsState>;
  close(): Promise<void>;
}

/** Shared through the process's Redis bus when it has one, else for this process only. */
export async function startSearchDefaults(search: SearchService, options: { bus?: RedisBus; log: Logger }): Promise<SearchDefaults> {
  if (!options.bus) return new LocalSearchDefaults(search);
  const defaults = new RedisSearchDefaults(search, options.bus, options.log);
  await defaults.start();
  return defaults;
}

/** Per process: a change lasts until the process exits. */
class LocalSearchDefaults implements SearchDefaults {
  protected readonly configured: FusionDefaults;
  protected appliedAt: string | null = null;

  constructor(protected readonly search: SearchService) {
    const { weights, fusion } = search.settings;
    this.configured = { weights: { ...weights }, fusion };
  }

  state(): FusionDefaultsState {
    const { weights, fusion } = this.search.settings;
    return {
      weights: { ...weights },
      fusion,
      source: this.appliedAt === null ? 'config' : 'applied',
      appliedAt: this.appliedAt,
      configured: this.configured,
      scope: 'instance',
    };
  }

  async apply(defaults: FusionDefaults): Promise<FusionDefaultsState> {
    this.adopt(defaults, new Date().toISOString());
    return this.state();
  }

  async reset(): Promise<FusionDefaultsState> {
    this.adopt(this.configured, null);
    return this.state();
  }

  async close(): Promise<void> {}

  protected adopt(defaults: FusionDefaults, appliedAt: string | null): void {
    this.search.updateFusionDefaults(defaults);
    this.appliedAt = appliedAt;
  }
}

const announcement = z.object({
  version: z.number().int(),
  applied: z
    .object({
      // Other signals' weights, should fusion gain some, travel along.
      weights: z.object({ bm25: weightSchema, vector: weightSchema }).catchall(weightSchema),
      fusion: fusionMethodSchema,
      appliedAt: z.string(),
    })
    .nullable(),
});
type Announcement = z.infer<typeof announcement>;

/**
 * Takes the next version, stores and publishes `{version, applied}` in one step, so the stored value and the order of
 * announcements always agree (with a separate INCR, two changes could be stored in the opposite order to their versions).
 * Slot: KEYS (settings version, settings) start with RedisKeys.prefix, one hash slot on a cluster; the channel is
 * classic pub/sub, which a cluster delivers to every node's subscribers.
 */
const ANNOUNCE_SCRIPT = `
local version = redis.call('INCR', KEYS[1])
local text = '{"version":' .. version .. ',"applied":' .. ARGV[2] .. '}'
redis.call('SET', KEYS[2], text)
redis.call('PUBLISH', ARGV[1], text)
return text
`;

/**
 * After Redis lost its data: the counter goes back up to the version this instance holds (else the next change would
 * get a version every instance ignores as old), and the applied defaults are stored again unless another instance got
 * there first (SET NX; instances that heard the same announcements store the same text).
 * Slot: KEYS (settings version, settings) start with RedisKeys.prefix, one hash slot on a cluster.
 */
const RESTORE_SCRIPT = `
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2], 'NX') end
return 1
`;

/**
 * Shared by every API instance: the applied defaults are stored under one key (read at start and after a reconnect, so
 * a restarted or new instance serves them too) and announced on a channel. Each change takes a version from a Redis
 * counter and goes out with SET and PUBLISH in one script; an instance ignores anything not newer than what it has, so
 * instances converge on the last change whatever order the start-up read and the messages arrive in.
 */
class RedisSearchDefaults extends LocalSearchDefaults {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;
  private version = 0;
  /** The announcement this instance last adopted, as stored: what it stores again after Redis lost its data. */
  private adopted = '';

  constructor(
    search: SearchService,
    private readonly bus: RedisBus,
    private readonly log: Logger,
  ) {
    super(search);
    this.redis = bus.redis;
    this.keys = bus.keys;
  }

  async start(): Promise<void> {
    // Subscribed before reading, so a change made in between is not missed; the version check orders the two. After
    // an outage the bus renews the subscription and calls `resync`: what was announced meanwhile is lost, read it again.
    await this.bus.listen(this.keys.searchSettingsChannel, {
      message: (text) => this.receive(text, 'announced'),
      resync: () => this.sync(),
      restore: async () => {
        await this.redis.eval(RESTORE_SCRIPT, 2, this.keys.searchSettingsVersion, this.keys.searchSettings, String(this.version), this.adopted);
      },
    });
    await this.sync();
  }

  private async sync(): Promise<void> {
    const stored = await this.redis.get(this.keys.searchSettings);
    if (stored !== null) this.receive(stored, 'stored');
  }

  override state(): FusionDefaultsState {
    return { ...super.state(), scope: 'cluster' };
  }

  override async apply(defaults: FusionDefaults): Promise<FusionDefaultsState> {
    // Checked here first: a bad setting must not reach the other instances.
    const weights = mergeWeights(defaults.weights, undefined);
    if (!fusionMethodSchema.safeParse(defaults.fusion).success) throw new ToolrouterError('invalid_request', `fusion must be ${FUSION_METHODS.join(' or ')}`, { param: 'fusion' });
    await this.announce({ weights: { ...weights } as FusionWeights & Record<string, number>, fusion: defaults.fusion, appliedAt: new Date().toISOString() });
    return this.state();
  }

  override async reset(): Promise<FusionDefaultsState> {
    await this.announce(null);
    return this.state();
  }

  private async announce(applied: Announcement['applied']): Promise<void> {
    // A reset is stored too (as `applied: null`): an instance that missed its announcement must still learn of it.
    const message = await this.bus.writes.run('changing the search settings', async (redis) =>
      String(
        await redis.eval(
          ANNOUNCE_SCRIPT,
          2,
          this.keys.searchSettingsVersion,
          this.keys.searchSettings,
          this.keys.searchSettingsChannel,
          JSON.stringify(applied),
        ),
      ),
    );
    // This instance's own announcement may arrive later (or, on a dropped subscription, never): apply it now.
    this.receive(message, 'applied');
  }

  private receive(text: string, how: 'stored' | 'announced' | 'applied'): void {
    let parsed: Announcement;
    try {
      parsed = announcement.parse(JSON.parse(text));
    } catch (error) {
      this.log.warn({ err: error, how }, 'ignoring malformed search settings from Redis');
      return;
    }
    if (parsed.version <= this.version) return;
    const { applied } = parsed;
    try {
      this.adopt(applied ?? this.configured, applied?.appliedAt ?? null);
    } catch (error) {
      this.log.warn({ err: error, how }, 'ignoring invalid search settings from Redis');
      return;
    }
    this.version = parsed.version;
    this.adopted = text;
    this.log.info({ how, version: parsed.version, weights: this.search.settings.weights, fusion: this.search.settings.fusion }, 'search defaults changed');
  }
}
