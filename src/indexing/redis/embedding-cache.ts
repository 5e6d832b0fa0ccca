import type { RedisClient, RedisKeys } from '../../redis/connection.js';
import type { EmbeddingCache } from '../embedding-cache.js';

/** Embeddings shared by every worker, as raw float32 bytes keyed by model id and text hash. */
export class RedisEmbeddingCache implements EmbeddingCache {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** Unused vectors expire, so texts of tools long gone do not accumulate forever. */
    private readonly ttlSeconds = 30 * 24 * 3600,
  ) {}

  async getMany(model: string, textHashes: readonly string[]): Promise<(Float32Array | undefined)[]> {
    if (textHashes.length === 0) return [];
    const values: (Float32Array | undefined)[] = [];
    // MGET in slices keeps each reply a reasonable size for catalogs of 100k tools.
    for (let start = 0; start < textHashes.length; start += 1000) {
      const slice = textHashes.slice(start, start + 1000);
      const buffers = await this.redis.mgetBuffer(...slice.map((hash) => this.keys.embedding(model, hash)));
      for (const buffer of buffers) values.push(buffer ? toFloat32(buffer) : undefined);
    }
    return values;
  }

  async setMany(model: string, entries: readonly { textHash: string; vector: Float32Array }[]): Promise<void> {
    for (let start = 0; start < entries.length; start += 1000) {
      const pipeline = this.redis.pipeline();
      for (const { textHash, vector } of entries.slice(start, start + 1000)) {
        pipeline.set(this.keys.embedding(model, textHash), Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength), 'EX', this.ttlSeconds);
      }
      await pipeline.exec();
    }
  }
}

function toFloat32(buffer: Buffer): Float32Array {
  // Copy: a Buffer from ioredis may sit at an offset that is not 4-byte aligned.
  const vector = new Float32Array(buffer.length / 4);
  new Uint8Array(vector.buffer).set(buffer);
  return vector;
}
