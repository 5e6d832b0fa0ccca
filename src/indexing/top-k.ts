/**
 * The `limit` best (id, score) pairs offered, best first; among equal scores the one offered first stays first. A
 * partial insertion selection: when most offers fall below the current cut-off (a common word matching thousands of
 * tools, a scan over every vector), each costs one comparison, and nothing is sorted.
 */
export class TopK {
  readonly ids: number[] = [];
  readonly scores: number[] = [];

  constructor(private readonly limit: number) {}

  /** Whether an offer of `score` would enter now: lets a caller skip costlier checks for the many that would not. */
  admits(score: number): boolean {
    const { scores, limit } = this;
    return limit > 0 && (scores.length < limit || score > scores[limit - 1]!);
  }

  offer(id: number, score: number): void {
    const { ids, scores, limit } = this;
    if (!this.admits(score)) return;
    let position = scores.length;
    while (position > 0 && scores[position - 1]! < score) position--;
    ids.splice(position, 0, id);
    scores.splice(position, 0, score);
    if (scores.length > limit) {
      ids.pop();
      scores.pop();
    }
  }
}
