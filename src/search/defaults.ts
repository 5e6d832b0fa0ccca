import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { z } from 'zod';
import { connectRedis, RedisKeys, subscribe, withRedis } from '../redis.js';
import type { FusionMethod, FusionWeights } from './fusion.js';
import type { SearchService } from './search.js';

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

export async function startSearchDefaults(
  search: SearchService,
  options: { redisUrl?: string; keys: RedisKeys; log: Logger },
): Promise<SearchDefaults> {
  if (!options.redisUrl) return new LocalSearchDefaults(search);
  const defaults = new RedisSearchDefaults(search, options.redisUrl, options.keys, options.log);
  try {
    await defaults.start();
  } catch (error) {
    await defaults.close();
    throw error;
  }
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

const weight = z.number().finite().min(0).max(1000);
const announcement = z.object({
  version: z.number().int(),
  applied: z
    .object({
      // Other signals' weights, should fusion gain some, travel along.
      weights: z.object({ bm25: weight, vector: weight }).catchall(weight),
      fusion: z.enum(['weighted', 'rrf']),
      appliedAt: z.string(),
    })
    .nullable(),
});
type Announcement = z.infer<typeof announcement>;

/**
 * Takes the next version, stores and publishes `{version, applied}` in one step, so the stored value and the order of
 * announcements always agree (with a separate INCR, two changes could be stored in the opposite order to their versions).
 */
const ANNOUNCE_SCRIPT = `
local version = redis.call('INCR', KEYS[1])
local text = '{"version":' .. version .. ',"applied":' .. ARGV[2] .. '}'
redis.call('SET', KEYS[2], text)
redis.call('PUBLISH', ARGV[1], text)
return text
`;

/**
 * Shared by every API instance: the applied defaults are stored under one key (read at start and after a reconnect, so
 * a restarted or new instance serves them too) and announced on a channel. Each change takes a version from a Redis
 * counter and goes out with SET and PUBLISH in one script; an instance ignores anything not newer than what it has, so
 * instances converge on the last change whatever order the start-up read and the messages arrive in.
 */
class RedisSearchDefaults extends LocalSearchDefaults {
  private readonly redis: Redis;
  private readonly subscriber: Redis;
  private version = 0;

  constructor(
    search: SearchService,
    redisUrl: string,
    private readonly keys: RedisKeys,
    private readonly log: Logger,
  ) {
    super(search);
    this.redis = connectRedis(redisUrl, 'toolrouter-api-settings', log);
    this.subscriber = connectRedis(redisUrl, 'toolrouter-api-settings-events', log);
  }

  async start(): Promise<void> {
    this.subscriber.on('message', (channel, message) => {
      if (channel === this.keys.searchSettingsChannel) this.receive(message, 'announced');
    });
    // After an outage the subscription comes back by itself, but what was announced meanwhile is lost: read it again.
    this.subscriber.on('ready', () => {
      this.sync().catch((error: unknown) => this.log.warn({ err: error }, 'could not read the search settings from Redis'));
    });
    // Subscribed before reading, so a change made in between is not missed; the version check orders the two.
    await subscribe(this.subscriber, this.keys.searchSettingsChannel, this.log);
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
    if (!announcement.shape.applied.safeParse({ ...defaults, appliedAt: '' }).success || defaults.weights.bm25 + defaults.weights.vector <= 0) {
      throw new RangeError('weights must be finite, 0 to 1000, and bm25 + vector must be positive');
    }
    await this.announce({ weights: { ...defaults.weights } as FusionWeights & Record<string, number>, fusion: defaults.fusion, appliedAt: new Date().toISOString() });
    return this.state();
  }

  override async reset(): Promise<FusionDefaultsState> {
    await this.announce(null);
    return this.state();
  }

  override async close(): Promise<void> {
    this.redis.disconnect();
    this.subscriber.disconnect();
  }

  private async announce(applied: Announcement['applied']): Promise<void> {
    // A reset is stored too (as `applied: null`): an instance that missed its announcement must still learn of it.
    const message = await withRedis('changing the search settings', async () =>
      String(
        await this.redis.eval(
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
    this.log.info({ how, version: parsed.version, weights: this.search.settings.weights, fusion: this.search.settings.fusion }, 'search defaults changed');
  }
}
