import hnswlib from 'hnswlib-node';
import type { LabelSet } from './label-set.js';
import type { ScoredName } from './lexical.js';
import { TopK } from './top-k.js';

/** Nearest neighbours by cosine similarity over L2-normalised vectors. */
export interface VectorIndex {
  readonly size: number;
  /** 'exact' scans every vector; 'hnsw' walks a graph whose bytes travel with the index artifact. */
  readonly kind: 'exact' | 'hnsw';
  readonly names: readonly string[];
  /** Best matches first; `score` is the cosine similarity. `visible`, when given, ranks only the labels it holds. */
  search(query: Float32Array, limit: number, visible?: LabelSet): ScoredName[];
}

export interface HnswSettings {
  /** Neighbours per node: more is more accurate and larger. */
  m: number;
  efConstruction: number;
  /** Candidate list size at query time; raised to the requested limit when smaller. */
  efSearch: number;
  /**
   * Catalogs up to this size are searched exactly: a scan of a few thousand vectors beats HNSW's overhead. The same
   * bound picks the strategy for a caller who sees part of a larger catalog: up to this many visible tools are scanned
   * exactly, more go through the graph with a filter.
   */
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

/** Vectors as one row-major matrix (what a build sends between threads), each checked to have `dimensions` values. */
export function packRows(vectors: readonly Float32Array[], dimensions: number): Float32Array {
  const rows = new Float32Array(vectors.length * dimensions);
  vectors.forEach((vector, row) => {
    if (vector.length !== dimensions) throw new Error(`the embedder returned ${vector.length} dimensions, expected ${dimensions}`);
    rows.set(vector, row * dimensions);
  });
  return rows;
}

/** `checkpoint`, called now and then while a graph is built, throws to stop the build. */
export function buildVectorIndex(names: readonly string[], vectors: readonly Float32Array[], settings = DEFAULT_HNSW, checkpoint?: () => void): VectorIndex {
  const builder = new VectorIndexBuilder(names.length, vectors[0]?.length ?? 0, settings, checkpoint);
  vectors.forEach((vector, label) => builder.add(label, vector));
  return builder.finish(names);
}

/**
 * Builds a vector index from rows that arrive in label order, a batch at a time, so graph construction can run while
 * later rows are still being embedded. Rows are taken in label order only: the graph then comes out the same as when
 * built from all vectors at once (hnswlib's seed is fixed), whatever the batch sizes were.
 */
export class VectorIndexBuilder {
  private readonly exact: Float32Array | undefined;
  private readonly graph: hnswlib.HierarchicalNSW | undefined;
  /** One array reused for every point: hnswlib-node takes plain arrays only, and a new one per row was garbage. */
  private readonly point: number[];
  private next = 0;

  constructor(
    /** Rows the index will hold (the catalog's size). */
    private readonly count: number,
    private readonly dimensions: number,
    private readonly settings: HnswSettings = DEFAULT_HNSW,
    private readonly checkpoint?: () => void,
    /**
     * A graph that already holds every row (the previous build of the same tools, in the same order): rows are then
     * replaced, not added, and only the changed ones need to come (see `replace`).
     */
    previous?: hnswlib.HierarchicalNSW,
  ) {
    this.point = new Array<number>(dimensions).fill(0);
    if (previous) {
      if (previous.getCurrentCount() !== count) throw new Error(`the previous graph holds ${previous.getCurrentCount()} rows, not ${count}`);
      this.graph = previous;
      this.next = count;
    } else if (count <= settings.exactThreshold) {
      this.exact = new Float32Array(count * dimensions);
    } else {
      this.graph = new hnswlib.HierarchicalNSW('cosine', Math.max(1, dimensions));
      // A fixed seed makes the graph, and so the results, the same on every instance that builds this catalog.
      this.graph.initIndex(Math.max(1, count), settings.m, settings.efConstruction, 100);
    }
  }

  /** Rows added so far: the next label expected. */
  get added(): number {
    return this.next;
  }

  /** Adds row `label` (the next one) from `rows`, which holds `rows.length / dimensions` consecutive rows from there. */
  addRows(label: number, rows: Float32Array): void {
    const count = this.dimensions === 0 ? 0 : rows.length / this.dimensions;
    for (let r = 0; r < count; r++) this.add(label + r, rows.subarray(r * this.dimensions, (r + 1) * this.dimensions));
  }

  add(label: number, vector: Float32Array): void {
    if (label !== this.next) throw new Error(`vector rows out of order: got ${label}, expected ${this.next}`);
    if (label >= this.count) throw new Error(`vector row ${label} is past the ${this.count} rows expected`);
    if (vector.length !== this.dimensions) throw new Error(`vector row ${label} has ${vector.length} dimensions, expected ${this.dimensions}`);
    this.next++;
    if (this.exact) {
      this.exact.set(vector, label * this.dimensions);
      return;
    }
    if (label % 1024 === 0) this.checkpoint?.();
    const point = this.point;
    for (let d = 0; d < vector.length; d++) point[d] = vector[d]!;
    this.graph!.addPoint(point, label);
  }

  /**
   * Gives row `label` of a graph built from a previous build a new vector: hnswlib moves the point and repairs its
   * links. The graph then differs from a fresh build of the same rows, but finds the same neighbours as well.
   */
  replace(label: number, vector: Float32Array): void {
    if (!this.graph || this.next !== this.count) throw new Error('only a graph that holds every row can have rows replaced');
    if (!(label >= 0 && label < this.count)) throw new Error(`vector row ${label} is outside the ${this.count} rows`);
    if (vector.length !== this.dimensions) throw new Error(`vector row ${label} has ${vector.length} dimensions, expected ${this.dimensions}`);
    for (let d = 0; d < vector.length; d++) this.point[d] = vector[d]!;
    this.graph.addPoint(this.point, label);
  }

  /** The index over the rows added, labelled with `names` (row i is `names[i]`). */
  finish(names: readonly string[]): VectorIndex {
    if (names.length !== this.count) throw new Error(`vector index of ${this.count} rows given ${names.length} names`);
    const built = this.built();
    if ('matrix' in built) return new ExactVectorIndex(names, { matrix: built.matrix, dimensions: this.dimensions });
    return new HnswVectorIndex(names, built.graph, this.settings.efSearch, this.settings.exactThreshold);
  }

  /** What was built, without names: the matrix of an exact index, or the graph (a build thread hands these on). */
  built(): { matrix: Float32Array } | { graph: hnswlib.HierarchicalNSW } {
    if (this.next !== this.count) throw new Error(`vector index has ${this.next} of ${this.count} rows`);
    return this.exact ? { matrix: this.exact } : { graph: this.graph! };
  }
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

  search(query: Float32Array, limit: number, visible?: LabelSet): ScoredName[] {
    const best = scan(this.matrix, this.dimensions, query, limit, visible?.labels, false);
    return best.ids.map((label, i) => ({ name: this.names[label]!, score: best.scores[i]! }));
  }
}

/**
 * The `limit` labels whose rows in `matrix` have the largest dot product with `query`, best first, equal scores in label
 * order. Without `labels` row i is label i. With them, `compact` says whether `matrix` holds only those labels' rows in
 * that order (a gathered subset) or every label's row (so label `labels[i]` is read from its own row).
 */
function scan(matrix: Float32Array, dimensions: number, query: Float32Array, limit: number, labels: Uint32Array | undefined, compact: boolean): TopK {
  const count = labels ? labels.length : matrix.length / Math.max(1, dimensions);
  const best = new TopK(Math.min(limit, count));
  for (let i = 0; i < count; i++) {
    const label = labels ? labels[i]! : i;
    const offset = (compact ? i : label) * dimensions;
    // Four partial sums: independent additions the CPU can overlap (about twice the scalar loop's speed).
    let a = 0;
    let b = 0;
    let c = 0;
    let e = 0;
    let d = 0;
    for (; d + 3 < dimensions; d += 4) {
      a += matrix[offset + d]! * query[d]!;
      b += matrix[offset + d + 1]! * query[d + 1]!;
      c += matrix[offset + d + 2]! * query[d + 2]!;
      e += matrix[offset + d + 3]! * query[d + 3]!;
    }
    for (; d < dimensions; d++) a += matrix[offset + d]! * query[d]!;
    best.offer(label, a + b + c + e);
  }
  return best;
}

/** Approximate search on hnswlib for large catalogs. */
export class HnswVectorIndex implements VectorIndex {
  readonly kind = 'hnsw';

  constructor(
    readonly names: readonly string[],
    readonly index: hnswlib.HierarchicalNSW,
    private readonly efSearch: number,
    /** Callers seeing at most this many tools get an exact scan of their vectors instead of a filtered graph walk. */
    private readonly exactVisible = DEFAULT_HNSW.exactThreshold,
  ) {}

  static build(names: readonly string[], vectors: readonly Float32Array[], settings: HnswSettings, checkpoint?: () => void): HnswVectorIndex {
    // Built as a graph whatever the size: callers of this method asked for HNSW, not for the exact threshold's choice.
    const builder = new VectorIndexBuilder(names.length, vectors[0]?.length ?? 1, { ...settings, exactThreshold: -1 }, checkpoint);
    vectors.forEach((vector, label) => builder.add(label, vector));
    const built = builder.finish(names) as HnswVectorIndex;
    return new HnswVectorIndex(names, built.index, settings.efSearch, settings.exactThreshold);
  }

  /**
   * A graph hnswlib wrote to `file`, read on libuv's thread pool: at 100k tools the synchronous read held the thread
   * that asked for ~100 ms.
   */
  static async load(names: readonly string[], file: string, dimensions: number, efSearch: number, exactVisible?: number): Promise<HnswVectorIndex> {
    const index = new hnswlib.HierarchicalNSW('cosine', dimensions);
    await index.readIndex(file);
    return new HnswVectorIndex(names, index, efSearch, exactVisible);
  }

  get size(): number {
    return this.names.length;
  }

  search(query: Float32Array, limit: number, visible?: LabelSet): ScoredName[] {
    const count = Math.min(limit, visible ? visible.size : this.names.length);
    if (count === 0) return [];
    if (visible && visible.size <= this.exactVisible) {
      // A filtered walk over a graph where few nodes pass visits most of it, calling back into JavaScript at every node
      // (28 ms for one visible tool in 10,000); scanning the visible vectors is exact and costs what the caller sees.
      const best = scan(this.gather(visible), this.index.getNumDimensions(), query, count, visible.labels, true);
      return best.ids.map((label, i) => ({ name: this.names[label]!, score: best.scores[i]! }));
    }
    const ef = Math.max(this.efSearch, count);
    this.index.setEf(ef);
    if (visible) {
      // The walk explores `ef` candidates whatever k is, so asking for all of them costs the same as asking for `count`;
      // when enough of them are visible, they are the visible nearest and no per-node filter is needed.
      const { neighbors, distances } = this.index.searchKnn(Array.from(query), Math.min(ef, this.names.length));
      const hits: ScoredName[] = [];
      for (let i = 0; i < neighbors.length && hits.length < count; i++) {
        if (visible.has(neighbors[i]!)) hits.push({ name: this.names[neighbors[i]!]!, score: 1 - distances[i]! });
      }
      if (hits.length === count) return hits;
    }
    // hnswlib applies the filter during the graph walk, so a caller seeing part of the catalog still gets its nearest
    // tools, not what is left of everyone's. The test is a byte lookup, but a call into JavaScript at every node visited.
    const mask = visible?.mask;
    const filter = mask ? (label: number) => mask[label] === 1 : undefined;
    const { neighbors, distances } = this.index.searchKnn(Array.from(query), count, filter);
    // hnswlib's cosine space reports distance = 1 - cosine.
    return neighbors.map((label, i) => ({ name: this.names[label]!, score: 1 - distances[i]! }));
  }

  /** The visible labels' vectors as one matrix, read back from the graph once per label set. */
  private gather(visible: LabelSet): Float32Array {
    if (visible.gathered) return visible.gathered;
    const dimensions = this.index.getNumDimensions();
    const matrix = new Float32Array(visible.size * dimensions);
    visible.labels.forEach((label, i) => matrix.set(this.index.getPoint(label), i * dimensions));
    visible.gathered = matrix;
    return matrix;
  }
}
