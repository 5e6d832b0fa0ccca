/**
 * Embeddings already computed, keyed by the embedder's cache key (provider, model, dimensions, document prefix) and
 * the hash of the embedded text, so a rebuild embeds only what changed. In-memory here; a Redis-backed
 * implementation shares it between workers.
 */
export interface EmbeddingCache {
  getMany(model: string, textHashes: readonly string[]): Promise<(Float32Array | undefined)[]>;
  setMany(model: string, entries: readonly { textHash: string; vector: Float32Array }[]): Promise<void>;
}

/** Vectors per shared buffer: a vector then costs its view, not an ArrayBuffer and an allocation of its own. */
const SLAB_VECTORS = 4096;

export class MemoryEmbeddingCache implements EmbeddingCache {
  /** Per embedder cache key, per text hash. */
  private readonly vectors = new Map<string, Map<string, Float32Array>>();
  private size = 0;
  private slab: { values: Float32Array; used: number } | undefined;

  constructor(private readonly maxEntries = 500_000) {}

  async getMany(model: string, textHashes: readonly string[]): Promise<(Float32Array | undefined)[]> {
    const byHash = this.vectors.get(model);
    return textHashes.map((textHash) => byHash?.get(textHash));
  }

  async setMany(model: string, entries: readonly { textHash: string; vector: Float32Array }[]): Promise<void> {
    let byHash = this.vectors.get(model);
    if (!byHash) {
      byHash = new Map();
      this.vectors.set(model, byHash);
    }
    for (const { textHash, vector } of entries) {
      if (byHash.has(textHash)) continue;
      // Oldest first out: Map iteration order is insertion order (per model; the oldest model's entries go first).
      if (this.size >= this.maxEntries) this.evictOldest();
      byHash.set(textHash, this.keep(vector));
      this.size++;
    }
  }

  /**
   * A copy of `vector` in the current slab. At 100k tools, 100k separately allocated vectors took ~25 MB more than
   * the same values in slabs; a slab is freed once every vector in it has been evicted.
   */
  private keep(vector: Float32Array): Float32Array {
    const dims = vector.length;
    if (!this.slab || this.slab.used + dims > this.slab.values.length) {
      this.slab = { values: new Float32Array(Math.max(dims, 1) * SLAB_VECTORS), used: 0 };
    }
    const view = this.slab.values.subarray(this.slab.used, this.slab.used + dims);
    view.set(vector);
    this.slab.used += dims;
    return view;
  }

  private evictOldest(): void {
    for (const [model, byHash] of this.vectors) {
      const oldest = byHash.keys().next();
      if (oldest.done) {
        this.vectors.delete(model);
        continue;
      }
      byHash.delete(oldest.value);
      this.size--;
      return;
    }
  }
}
