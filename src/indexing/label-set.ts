/**
 * The labels (positions in an index's name list) a caller may see, computed once per caller, index and catalog
 * rather than asked of a predicate for every node a graph walk visits. Tied to the index whose labels it holds.
 */
export class LabelSet {
  /** 1 where the label is visible; what a filtered graph walk tests. */
  readonly mask: Uint8Array;
  /** The visible labels in ascending order; what an exact scan walks. */
  readonly labels: Uint32Array;
  /**
   * The visible labels' vectors, gathered by a graph index the first time it scans this set exactly, so a small set is
   * scanned from one contiguous matrix on every later search instead of read back from the graph.
   */
  gathered: Float32Array | undefined;

  constructor(mask: Uint8Array) {
    this.mask = mask;
    let count = 0;
    for (let label = 0; label < mask.length; label++) count += mask[label]!;
    this.labels = new Uint32Array(count);
    for (let label = 0, at = 0; label < mask.length; label++) if (mask[label]) this.labels[at++] = label;
  }

  static of(names: readonly string[], visible: (name: string) => boolean): LabelSet {
    const mask = new Uint8Array(names.length);
    for (let label = 0; label < names.length; label++) if (visible(names[label]!)) mask[label] = 1;
    return new LabelSet(mask);
  }

  get size(): number {
    return this.labels.length;
  }

  has(label: number): boolean {
    return this.mask[label] === 1;
  }
}
