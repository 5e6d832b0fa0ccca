/** `toolrouter audit verify` and `toolrouter audit export`: read the trail the configuration names (docs/audit.md). */
import { ChainVerifier } from '../audit/chain.js';
import { openAuditStore } from '../audit/open.js';
import type { AuditStore } from '../audit/store.js';
import { connectRedis, RedisKeys } from '../redis/connection.js';
import { redisForm } from '../redis/settings.js';
import { StartupError, startConfig, type StartOptions } from './startup.js';

async function withStore<T>(options: StartOptions, work: (store: AuditStore, where: string) => Promise<T>): Promise<T> {
  const { config } = startConfig(options);
  const redis = redisForm(config.redis) ? connectRedis(config.redis, 'toolrouter-audit-cli') : undefined;
  try {
    if (!redis && config.stateDir === undefined) {
      throw new StartupError('no audit trail to read: without Redis the trail is kept in files only when stateDir is set (in memory otherwise)');
    }
    const { store, where } = openAuditStore({
      settings: config.audit,
      ...(redis ? { redis: { client: redis, keys: RedisKeys.of(config.queue.prefix, config.redis) } } : {}),
      ...(config.stateDir === undefined ? {} : { stateDir: config.stateDir }),
    });
    return await work(store, where);
  } finally {
    redis?.disconnect();
  }
}

/** Exit 0 when every record present links to the one before it and matches its hash; 1 naming the first that does not. */
export async function auditVerify(options: StartOptions): Promise<void> {
  await withStore(options, async (store, where) => {
    const verifier = new ChainVerifier();
    for await (const record of store.scan()) {
      const broken = verifier.check(record);
      if (broken) {
        console.error(`toolrouter: audit trail broken at record ${broken.id} (record ${verifier.checked} of ${where}): ${broken.reason}`);
        process.exitCode = 1;
        return;
      }
    }
    console.log(`audit trail intact: ${verifier.checked} record(s) in ${where}`);
  });
}

/** Every record (or those between --since and --until), oldest first, one JSON object a line. */
export async function auditExport(options: StartOptions & { since?: string; until?: string }): Promise<void> {
  const since = options.since === undefined ? undefined : timeOf(options.since, '--since');
  const until = options.until === undefined ? undefined : timeOf(options.until, '--until');
  await withStore(options, async (store) => {
    for await (const record of store.scan()) {
      const time = Date.parse(record.time);
      if ((since !== undefined && time < since) || (until !== undefined && time > until)) continue;
      if (!process.stdout.write(JSON.stringify(record) + '\n')) await new Promise((resolve) => process.stdout.once('drain', resolve));
    }
  });
}

function timeOf(value: string, option: string): number {
  const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(ms)) throw new StartupError(`${option}: must be an ISO 8601 time or milliseconds since the epoch`);
  return ms;
}
