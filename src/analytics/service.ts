import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import type { RedisBus } from '../redis/bus.js';
import { SearchLog } from './log.js';
import { MemorySearchLogStore, RedisSearchLogStore } from './store.js';
import type { AnalyticsSettings } from './types.js';

export interface AnalyticsOptions {
  settings: AnalyticsSettings;
  metrics?: Pick<Metrics, 'searchOutcomes' | 'searchLogDropped'>;
  log?: Logger;
  /** The process's Redis bus: with one, every instance writes and reads one log; without, the log is this process's. */
  bus?: Pick<RedisBus, 'redis' | 'keys'>;
}

/** The search log for this process, or undefined when analytics.enabled is false. */
export function startAnalytics({ settings, metrics, log, bus }: AnalyticsOptions): SearchLog | undefined {
  if (!settings.enabled) return undefined;
  const retention = { maxEntries: settings.maxEntries, maxAgeDays: settings.maxAgeDays };
  const store = bus ? new RedisSearchLogStore(bus, retention) : new MemorySearchLogStore(retention);
  return new SearchLog({ settings, store, ...(metrics ? { metrics } : {}), ...(log ? { log } : {}) });
}
