import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildVectorIndex, ExactVectorIndex, HnswVectorIndex, DEFAULT_HNSW } from '../../src/indexing/vector.js';

/** Deterministic pseudo-random unit vectors (xorshift), so failures reproduce. */
function unitVectors(count: number, dimensions: number, seed = 7): Float32Array[] {
  let state = seed;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return ((state >>> 0) / 0xffffffff) * 2 - 1;
  };
  return Array.from({ length: count }, () => {
    const vector = Float32Array.from({ length: dimensions }, next);
    const norm = Math.hypot(...vector);
    return vector.map((value) => value / norm);
  });
}

describe('vector index', () => {
  const names = Array.from({ length: 3000 }, (_, i) => `tool_${i}`);
  const vectors = unitVectors(names.length, 32);
  const queries = unitVectors(50, 32, 99);

  it('scans exactly up to the threshold and switches to HNSW above it', () => {
    assert.ok(buildVectorIndex(names.slice(0, 100), vectors.slice(0, 100)) instanceof ExactVectorIndex);
    assert.ok(buildVectorIndex(names, vectors, { ...DEFAULT_HNSW, exactThreshold: 1000 }) instanceof HnswVectorIndex);
  });

  it('exact search returns cosine similarities, best first', () => {
    const exact = new ExactVectorIndex(names, vectors);
    const hits = exact.search(vectors[42]!, 5);
    assert.equal(hits[0]!.name, 'tool_42');
    assert.ok(Math.abs(hits[0]!.score - 1) < 1e-5);
    for (let i = 1; i < hits.length; i++) assert.ok(hits[i - 1]!.score >= hits[i]!.score);
    assert.deepEqual(exact.search(vectors[0]!, 0), []);
  });

  it('HNSW finds nearly the same neighbours as the exact scan, with the same cosine scores', () => {
    const exact = new ExactVectorIndex(names, vectors);
    const hnsw = HnswVectorIndex.build(names, vectors, DEFAULT_HNSW);
    let found = 0;
    for (const query of queries) {
      const truth = new Set(exact.search(query, 10).map((hit) => hit.name));
      const approximate = hnsw.search(query, 10);
      found += approximate.filter((hit) => truth.has(hit.name)).length;
      const top = approximate[0]!;
      const cosine = query.reduce((sum, value, d) => sum + value * vectors[Number(top.name.slice(5))]![d]!, 0);
      assert.ok(Math.abs(top.score - cosine) < 1e-4, `score ${top.score} is not the cosine ${cosine}`);
    }
    const recall = found / (queries.length * 10);
    assert.ok(recall >= 0.95, `HNSW recall@10 ${recall}`);
  });

  it('asks HNSW for no more neighbours than it holds', () => {
    const small = HnswVectorIndex.build(names.slice(0, 3), vectors.slice(0, 3), DEFAULT_HNSW);
    assert.equal(small.search(queries[0]!, 10).length, 3);
  });
});
