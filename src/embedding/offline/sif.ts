/** SIF weighting (Arora, Liang & Ma 2017) baked into the embedding table: word weights and common components. */
import { SPECIAL_TOKENS } from './model-files.js';
import type { WinkVectors } from './glove.js';

/**
 * Unigram probability from frequency rank under Zipf's law with exponent 1: p(r) = 1 / (r * H_V), where
 * H_V = sum_{k=1..V} 1/k ~ ln V + gamma normalises the distribution over the V words of the source list.
 * GloVe's vocabulary is sorted by corpus frequency, so the rank is all we need; for V = 341,479 this gives
 * p("the") ~ 0.075, close to the ~0.06 measured in English corpora, and the law is known to hold well over the
 * middle of the range, which is where the weighting matters.
 */
export function zipfProbability(rank: number, vocabularySize: number): number {
  const harmonic = Math.log(vocabularySize) + 0.5772156649 + 1 / (2 * vocabularySize);
  return 1 / (rank * harmonic);
}

/**
 * SIF weight a / (a + p(w)) (Arora, Liang & Ma 2017, who report a in [1e-4, 1e-3] working across tasks).
 * With the Zipf estimate above, a = 1e-4 gives "the" 0.001, rank 100 0.12, rank 1000 0.57, rank 10k 0.93: it damps
 * function words and generic verbs hard and leaves rarer, more specific words (the ones that tell tools apart)
 * near 1. On the tool-retrieval sets a = 1e-4 beat 1e-3 clearly (MetaTool vector-only R@1 0.25 vs 0.17 without
 * component removal), with 3e-5..3e-4 all close.
 */
export function sifWeight(rank: number, vocabularySize: number, a: number): number {
  const p = zipfProbability(rank, vocabularySize);
  return a / (a + p);
}

/** The embedding table: special-token rows (zero) followed by the SIF-weighted word vectors. */
export function buildEmbeddingTable(
  src: WinkVectors,
  sifA: number,
  onProgress?: (done: number, total: number) => void,
): Float32Array {
  const dims = src.dimensions;
  const offset = SPECIAL_TOKENS.length;
  const table = new Float32Array((src.words.length + offset) * dims);
  const step = 10_000;
  for (let i = 0; i < src.words.length; i++) {
    const w = sifWeight(src.ranks[i]!, src.sourceWords, sifA);
    const from = i * dims;
    const to = (i + offset) * dims;
    for (let d = 0; d < dims; d++) table[to + d] = src.vectors[from + d]! * w;
    if (onProgress && i % step === 0) onProgress(i, src.words.length);
  }
  onProgress?.(src.words.length, src.words.length);
  return table;
}

/**
 * SIF's second step removes the projection on the first principal component(s) of the sentence embeddings, a
 * direction shared by all text (syntax, frequency) that otherwise dominates cosine similarity. The projection is
 * linear and mean pooling is linear, so removing it from every row of the table is exactly the same as removing it
 * from every pooled sentence vector, and it can be baked in. Without a sentence corpus, the components are taken
 * from the rows themselves weighted by their Zipf probability (the expected word distribution of a sentence),
 * uncentred as in SIF. Deterministic: fixed start vector, fixed iteration count.
 *
 * Returns the removed unit directions (for tests and the README).
 */
export function removeCommonComponents(
  table: Float32Array,
  dims: number,
  firstRow: number,
  rowWeight: (row: number) => number,
  components: number,
  onProgress?: (done: number, total: number) => void,
): Float64Array[] {
  if (components <= 0) return [];
  const rows = table.length / dims;
  // Weighted second-moment matrix C = sum_i w_i x_i x_i^T (dims x dims); one pass over the table. Rows go in
  // blocks of 4 so each C entry is loaded and stored once per block: this loop is most of the build time.
  const c = new Float64Array(dims * dims);
  const x0 = new Float64Array(dims);
  const x1 = new Float64Array(dims);
  const x2 = new Float64Array(dims);
  const x3 = new Float64Array(dims);
  const block = [x0, x1, x2, x3];
  const step = 10_000;
  let nextReport = firstRow;
  for (let r = firstRow; r < rows; r += 4) {
    for (let k = 0; k < 4; k++) {
      const xk = block[k]!;
      if (r + k >= rows) {
        xk.fill(0);
        continue;
      }
      // sqrt(w) on both factors turns w x x^T into y y^T.
      const sw = Math.sqrt(rowWeight(r + k));
      const base = (r + k) * dims;
      for (let d = 0; d < dims; d++) xk[d] = table[base + d]! * sw;
    }
    for (let i = 0; i < dims; i++) {
      const a0 = x0[i]!;
      const a1 = x1[i]!;
      const a2 = x2[i]!;
      const a3 = x3[i]!;
      const ci = i * dims;
      for (let j = i; j < dims; j++) {
        c[ci + j] = c[ci + j]! + a0 * x0[j]! + a1 * x1[j]! + a2 * x2[j]! + a3 * x3[j]!;
      }
    }
    if (onProgress && r >= nextReport) {
      onProgress(r, rows);
      nextReport += step;
    }
  }
  for (let i = 0; i < dims; i++) for (let j = 0; j < i; j++) c[i * dims + j] = c[j * dims + i]!;

  // Top eigenvectors by power iteration with deflation; C is tiny, so iterate generously.
  const directions: Float64Array[] = [];
  for (let k = 0; k < components; k++) {
    let u: Float64Array = new Float64Array(dims).fill(1 / Math.sqrt(dims));
    let lambda = 0;
    for (let it = 0; it < 500; it++) {
      const v = new Float64Array(dims);
      for (let i = 0; i < dims; i++) {
        let sum = 0;
        for (let j = 0; j < dims; j++) sum += c[i * dims + j]! * u[j]!;
        v[i] = sum;
      }
      const norm = Math.hypot(...v);
      if (norm === 0) break;
      for (let i = 0; i < dims; i++) v[i] = v[i]! / norm;
      let delta = 0;
      for (let i = 0; i < dims; i++) delta += Math.abs(v[i]! - u[i]!);
      u = v;
      lambda = norm;
      if (delta < 1e-12) break;
    }
    directions.push(u);
    for (let i = 0; i < dims; i++) for (let j = 0; j < dims; j++) c[i * dims + j] = c[i * dims + j]! - lambda * u[i]! * u[j]!;
  }

  for (let r = firstRow; r < rows; r++) {
    const base = r * dims;
    for (const u of directions) {
      let dot = 0;
      for (let d = 0; d < dims; d++) dot += table[base + d]! * u[d]!;
      for (let d = 0; d < dims; d++) table[base + d] = table[base + d]! - dot * u[d]!;
    }
  }
  onProgress?.(rows, rows);
  return directions;
}
