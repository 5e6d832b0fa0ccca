/**
 * Embeddings already computed, keyed by the embedder's cache key (provider, model, dimensions, document prefix) and
 * the hash of the embedded text, so a rebuild embeds only what changed. In-memory here; a Redis-backed
 * implementation shares it between workers.
 */
export interface EmbeddingCache {
  getMany(model: string, textHashes: readonly string[]): Promise<(Float32Array | undefined)[]>;
  setMany(model: string, entries: readonly { textHash: string; vector: Float32Array }[]): Promise<void>;
}

export class MemoryEmbeddingCache implements EmbeddingCache {
  private readonly vectors = new Map<string, Float32Array>();

  constructor(private readonly maxEntries = 500_000) {}

  async getMany(model: string, textHashes: readonly string[]): Promise<(Float32Array | undefined)[]> {
    return textHashes.map((textHash) => this.vectors.get(`${model}\u0000${textHash}`));
  }

  async setMany(model: string, entries: readonly { textHash: string; vector: Float32Array }[]): Promise<void> {
    for (const { textHash, vector } of entries) {
      // Oldest first out: Map iteration order is insertion order.
      if (this.vectors.size >= this.maxEntries) this.vectors.delete(this.vectors.keys().next().value!);
      this.vectors.set(`${model}\u0000${textHash}`, vector);
    }
  }
}
