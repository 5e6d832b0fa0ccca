import hnswlib from 'hnswlib-node';
import type { ScoredName } from './lexical.js';
import { TopK } from './top-k.js';

/** Nearest neighbours by cosine similarity over L2-normalised vectors. */
export interface VectorIndex {
  readonly size: number;
  /** 'exact' scans every vector; 'hnsw' walks a graph whose bytes travel with the index artifact. */
  readonly kind: 'exact' | 'hnsw';
  /** Best matches first; `score` is the cosine similarity. `accept`, when given, ranks only the names it accepts. */
  search(query: Float32Array, limit: number, accept?: (name: string) => boolean): ScoredName[];
}

export interface HnswSettings {
  /** Neighbours per node: more is more accurate and larger. */
  m: number;
  efConstruction: number;
  /** Candidate list size at query time; raised to the requested limit when smaller. */
  efSearch: number;
  /** Catalogs up to this size are searched exactly: a scan of a few thousand vectors beats HNSW's overhead. */
  exactThreshold: number;
}

/**
 * Measured on the bench catalogs (real tool texts, offline model) against the exact scan: recall@10 at 100k tools is
 * 0.87 with efConstruction 200 / efSearch 64, 0.94 with 100 / 256 and 0.98 with 100 / 512 (0.999 at 10k), where a
 * search costs under 1 ms. Construction time is about proportional to efConstruction (100k: ~8.5 s at 100, 17–19 s
 * at 200), and a wider search recovers more than a denser graph, so the index is built at 100 and searched at 512
 * (`bench/hnsw-sweep.ts` measures the trade-off).
 */
export const DEFAULT_HNSW: HnswSettings = { m: 16, efConstruction: 100, efSearch: 512, exactThreshold: 2048 };

export function buildVectorIndex(names: readonly string[], vectors: readonly Float32Array[], settings = DEFAULT_HNSW): VectorIndex {
  return names.length <= settings.exactThreshold
    ? new ExactVectorIndex(names, vectors)
    : HnswVectorIndex.build(names, vectors, settings);
}

/** Brute-force scan over one contiguous matrix; exact, and for small catalogs the fastest option. */
export class ExactVectorIndex implements VectorIndex {
  readonly kind = 'exact';
  /** Row-major names.length × dimensions. */
  readonly matrix: Float32Array;
  readonly dimensions: number;

  constructor(
    readonly names: readonly string[],
    vectors: readonly Float32Array[] | { matrix: Float32Array; dimensions: number },
  ) {
    if (Array.isArray(vectors)) {
      this.dimensions = vectors[0]?.length ?? 0;
      this.matrix = new Float32Array(names.length * this.dimensions);
      vectors.forEach((vector, row) => this.matrix.set(vector, row * this.dimensions));
    } else {
      ({ matrix: this.matrix, dimensions: this.dimensions } = vectors as { matrix: Float32Array; dimensions: number });
    }
  }

  get size(): number {
    return this.names.length;
  }

  search(query: Float32Array, limit: number, accept?: (name: string) => boolean): ScoredName[] {
    const { dimensions, matrix } = this;
    const scores = new Float32Array(this.names.length);
    for (let row = 0; row < this.names.length; row++) {
      let dot = 0;
      const offset = row * dimensions;
      for (let d = 0; d < dimensions; d++) dot += matrix[offset + d]! * query[d]!;
      scores[row] = dot;
    }
    const best = new TopK(Math.min(limit, scores.length));
    for (let row = 0; row < scores.length; row++) {
      if (best.admits(scores[row]!) && (!accept || accept(this.names[row]!))) best.offer(row, scores[row]!);
    }
    return best.ids.map((row) => ({ name: this.names[row]!, score: scores[row]! }));
  }
}

/** Approximate search on hnswlib for large catalogs. */
export class HnswVectorIndex implements VectorIndex {
  readonly kind = 'hnsw';

  constructor(
    readonly names: readonly string[],
    readonly index: hnswlib.HierarchicalNSW,
    private readonly efSearch: number,
  ) {}

  static build(names: readonly string[], vectors: readonly Float32Array[], settings: HnswSettings): HnswVectorIndex {
    const dimensions = vectors[0]?.length ?? 1;
    const index = new hnswlib.HierarchicalNSW('cosine', dimensions);
    // A fixed seed makes the graph, and so the results, the same on every instance that builds this catalog.
    index.initIndex(Math.max(1, names.length), settings.m, settings.efConstruction, 100);
    vectors.forEach((vector, label) => index.addPoint(Array.from(vector), label));
    return new HnswVectorIndex(names, index, settings.efSearch);
  }

  get size(): number {
    return this.names.length;
  }

  search(query: Float32Array, limit: number, accept?: (name: string) => boolean): ScoredName[] {
    const count = Math.min(limit, this.names.length);
    if (count === 0) return [];
    this.index.setEf(Math.max(this.efSearch, count));
    // hnswlib applies the filter during the graph walk, so a caller seeing a small part of the catalog still gets its
    // nearest tools, not what is left of everyone's.
    const filter = accept ? (label: number) => accept(this.names[label]!) : undefined;
    const { neighbors, distances } = this.index.searchKnn(Array.from(query), count, filter);
    // hnswlib's cosine space reports distance = 1 - cosine.
    return neighbors.map((label, i) => ({ name: this.names[label]!, score: 1 - distances[i]! }));
  }
}
