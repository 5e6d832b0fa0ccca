import type { ScoredName } from '../indexing/lexical.js';
import { TopK } from '../indexing/top-k.js';
import { DAY_MS, type FeedbackEvent, type FeedbackSettings } from './types.js';

export type NeighbourSettings = Pick<
  FeedbackSettings,
  'halfLifeDays' | 'maxEvents' | 'maxAgeDays' | 'neighbours' | 'minSimilarity' | 'maxBoost'
>;

interface Entry {
  id: string;
  tool: string;
  relevant: boolean;
  time: number;
  scope: string;
}

/**
 * Recorded queries' embeddings in one Float32Array, row per event, scanned exactly: at the tens of thousands of events
 * a retention limit allows, a scan is a few million multiply-adds (well under a millisecond at 100 dimensions) and
 * needs no index to keep up to date as events come and go.
 */
export class FeedbackNeighbours {
  private matrix: Float32Array;
  private entries: Entry[] = [];
  private readonly ids = new Set<string>();

  constructor(
    readonly dimensions: number,
    private readonly settings: NeighbourSettings,
    private readonly now: () => number = Date.now,
  ) {
    this.matrix = new Float32Array(dimensions * 64);
  }

  get size(): number {
    return this.entries.length;
  }

  /** Adds an event (an id already held is ignored: an instance hears its own writes back from the store). */
  add(event: FeedbackEvent): boolean {
    if (event.embedding.length !== this.dimensions || this.ids.has(event.id)) return false;
    const row = this.entries.length;
    if ((row + 1) * this.dimensions > this.matrix.length) {
      const grown = new Float32Array(this.matrix.length * 2);
      grown.set(this.matrix);
      this.matrix = grown;
    }
    this.matrix.set(event.embedding, row * this.dimensions);
    this.entries.push({ id: event.id, tool: event.tool, relevant: event.relevant, time: event.time, scope: event.scope });
    this.ids.add(event.id);
    // Compacting in batches keeps the cost of the retention limit amortised over many adds.
    if (this.entries.length > this.settings.maxEvents + Math.max(64, this.settings.maxEvents >> 3)) this.compact();
    return true;
  }

  /**
   * Drops events beyond the retention limits: the oldest beyond maxEvents, and any older than maxAgeDays. Rows stay in
   * insertion order, which is time order apart from the odd late arrival from another instance.
   */
  compact(): void {
    const cutoff = this.now() - this.settings.maxAgeDays * DAY_MS;
    const overflow = Math.max(0, this.entries.length - this.settings.maxEvents);
    let kept = 0;
    for (let row = 0; row < this.entries.length; row++) {
      const entry = this.entries[row]!;
      if (row < overflow || entry.time < cutoff) {
        this.ids.delete(entry.id);
        continue;
      }
      if (kept !== row) {
        this.entries[kept] = entry;
        this.matrix.copyWithin(kept * this.dimensions, row * this.dimensions, (row + 1) * this.dimensions);
      }
      kept++;
    }
    this.entries.length = kept;
  }

  /**
   * Tools called for queries like this one: over the `neighbours` most similar recorded queries with cosine ≥
   * minSimilarity (and, when `scope` is given, recorded in that scope), each tool gets Σ similarity × decay ×
   * (relevant ? 1 : −1), decay = 0.5^(age / halfLife). Clamped to ±maxBoost so a tool called for everything cannot
   * outweigh the query's own evidence, and reported as a share of maxBoost, in [-1, 1], best first.
   */
  boosts(query: Float32Array, scope: string | undefined): ScoredName[] {
    if (query.length !== this.dimensions || this.entries.length === 0) return [];
    const { neighbours, minSimilarity, halfLifeDays, maxAgeDays, maxBoost } = this.settings;
    const now = this.now();
    const cutoff = now - maxAgeDays * DAY_MS;
    const dims = this.dimensions;
    const matrix = this.matrix;
    const entries = this.entries;
    // The best `neighbours` rows so far, by similarity, best first.
    const best = new TopK(neighbours);
    for (let row = 0, base = 0; row < entries.length; row++, base += dims) {
      // Four accumulators let the multiply-adds overlap; this loop is the whole cost of the feedback signal.
      let a0 = 0;
      let a1 = 0;
      let a2 = 0;
      let a3 = 0;
      let d = 0;
      for (; d + 3 < dims; d += 4) {
        a0 += query[d]! * matrix[base + d]!;
        a1 += query[d + 1]! * matrix[base + d + 1]!;
        a2 += query[d + 2]! * matrix[base + d + 2]!;
        a3 += query[d + 3]! * matrix[base + d + 3]!;
      }
      for (; d < dims; d++) a0 += query[d]! * matrix[base + d]!;
      const dot = a0 + a1 + a2 + a3;
      if (dot < minSimilarity) continue;
      const entry = entries[row]!;
      if ((scope !== undefined && entry.scope !== scope) || entry.time < cutoff) continue;
      best.offer(row, dot);
    }
    const { ids: rows, scores: sims } = best;
    const totals = new Map<string, number>();
    rows.forEach((row, i) => {
      const entry = this.entries[row]!;
      // A clock a little ahead on another instance must not make an event count more than a fresh one.
      const ageDays = Math.max(0, now - entry.time) / DAY_MS;
      const contribution = sims[i]! * 0.5 ** (ageDays / halfLifeDays) * (entry.relevant ? 1 : -1);
      totals.set(entry.tool, (totals.get(entry.tool) ?? 0) + contribution);
    });
    const result: ScoredName[] = [];
    for (const [name, total] of totals) {
      if (total === 0) continue;
      result.push({ name, score: Math.max(-maxBoost, Math.min(maxBoost, total)) / maxBoost });
    }
    return result.sort((a, b) => b.score - a.score || a.name.localeCompare(b.name));
  }
}
