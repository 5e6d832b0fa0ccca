import type { RedisClient, RedisKeys } from '../../redis/connection.js';
import { DEFAULT_RETENTION, registerAndTrim, type Retention } from './retention.js';

export interface IndexPointer {
  hash: string;
  version: number;
  builtAt: string;
}

/** What API instances hear on the index channel. */
export type IndexEvent =
  | { type: 'swapped'; hash: string; version: number }
  | { type: 'failed'; hash: string; error: string; final: boolean }
  | { type: 'superseded'; hash: string };

/**
 * Moves the pointer only forward: a build for an older catalog version never replaces a newer index, whichever worker
 * finishes first. The promoted artifact is kept; the ones it replaces are trimmed by retention (the previous one stays,
 * for a rollback and for instances still loading it). Publishes the swap in the same script, so no instance can miss
 * the pointer move. Slot: KEYS (pointer, artifact) start with RedisKeys.prefix, one hash slot on a cluster; the swap is
 * published on a classic channel (ARGV[4]), which a cluster delivers to every node's subscribers.
 */
const PROMOTE = `
local current = redis.call('GET', KEYS[1])
local version = tonumber(ARGV[2])
if current then
  local decoded = cjson.decode(current)
  if tonumber(decoded.version) > version then return 0 end
end
redis.call('SET', KEYS[1], cjson.encode({hash = ARGV[1], version = version, builtAt = ARGV[3]}))
redis.call('PERSIST', KEYS[2])
redis.call('PUBLISH', ARGV[4], cjson.encode({type = 'swapped', hash = ARGV[1], version = version}))
return 1
`;

export class ArtifactStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly model: string,
    private readonly retention: Pick<Retention, 'indexes' | 'indexBytes'> = DEFAULT_RETENTION,
  ) {}

  /** New artifacts expire unless promoted, so abandoned builds clean themselves up within the hour. */
  async put(catalogHash: string, artifact: Buffer): Promise<void> {
    await this.redis.set(this.keys.artifact(this.model, catalogHash), artifact, 'EX', 3600);
  }

  /** Drops a built artifact that lost the race to a newer one, unless the pointer names it. */
  async discard(catalogHash: string): Promise<void> {
    if ((await this.pointer())?.hash !== catalogHash) await this.redis.del(this.keys.artifact(this.model, catalogHash));
  }

  async get(catalogHash: string): Promise<Buffer | null> {
    return this.redis.getBuffer(this.keys.artifact(this.model, catalogHash));
  }

  async has(catalogHash: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.artifact(this.model, catalogHash))) === 1;
  }

  async pointer(): Promise<IndexPointer | null> {
    const raw = await this.redis.get(this.keys.indexPointer(this.model));
    return raw ? (JSON.parse(raw) as IndexPointer) : null;
  }

  /** Points every instance at this artifact unless a newer version is already live; true when it moved. */
  async promote(catalogHash: string, version: number, builtAt: string): Promise<boolean> {
    const moved = await this.redis.eval(
      PROMOTE,
      2,
      this.keys.indexPointer(this.model),
      this.keys.artifact(this.model, catalogHash),
      catalogHash,
      String(version),
      builtAt,
      this.keys.indexChannel(this.model),
    );
    if (moved !== 1) return false;
    await registerAndTrim(
      this.redis,
      { registry: this.keys.artifacts(this.model), prefix: this.keys.artifact(this.model, '') },
      { hash: catalogHash, version },
      { keep: this.retention.indexes, maxBytes: this.retention.indexBytes, protectedHash: catalogHash },
    );
    return true;
  }

  async publish(event: IndexEvent): Promise<void> {
    await this.redis.publish(this.keys.indexChannel(this.model), JSON.stringify(event));
  }
}
