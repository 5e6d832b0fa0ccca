import { sha256, type CatalogSnapshot } from '../catalog/catalog.js';
import { embeddingText } from '../catalog/text.js';
import type { Embedder } from '../embedding/embedder.js';
import type { EmbeddingCache } from './embedding-cache.js';
import { DEFAULT_LEXICAL, LexicalIndex, type LexicalSettings } from './lexical.js';
import { buildVectorIndex, DEFAULT_HNSW, type HnswSettings, type VectorIndex } from './vector.js';

/** Everything search needs for one catalog snapshot: BM25 and vectors over the same tools. */
export interface SearchIndex {
  readonly catalogHash: string;
  /** Embedding model id the vectors were made with. */
  readonly model: string;
  readonly builtAt: string;
  readonly size: number;
  readonly lexical: LexicalIndex;
  readonly vectors: VectorIndex;
}

export interface BuildOptions {
  embedder: Embedder;
  cache?: EmbeddingCache;
  lexical?: LexicalSettings;
  hnsw?: HnswSettings;
  /** Polled between steps of the build; when it says so, the build stops with a BuildCancelledError. */
  cancelled?: () => boolean;
}

export class BuildCancelledError extends Error {
  override readonly name = 'BuildCancelledError';
}

/**
 * Texts embedded per call when a build can be cancelled (the points at which it checks), and per batch handed on when
 * embedding streams into a build: small enough that the graph starts early and the event loop is free often, large
 * enough that the embedder still groups texts of similar length into its batches (four of 64). Small for memory too:
 * what a chunk holds (its texts, token ids, vectors) lives across the embedder's yields, so V8 moves it to the old
 * generation before it dies; at 2,048 texts a chunk that was ~350 MB of garbage on the API thread's heap during a
 * 100k-tool build (peak RSS 1.62 GB), at 256 under 50 MB (1.33 GB).
 */
export const EMBED_CHUNK = 256;

export interface BuildStats {
  tools: number;
  /** Texts that were not in the embedding cache and went through the model. */
  embedded: number;
  durationMs: number;
}

export async function buildSearchIndex(
  snapshot: CatalogSnapshot,
  options: BuildOptions,
): Promise<{ index: SearchIndex; stats: BuildStats }> {
  const started = performance.now();
  const { entries } = snapshot;
  const names = entries.map((entry) => entry.tool.name);
  // Derived here rather than kept on every catalog entry: a second copy of each tool's text was ~60 MB of heap at 100k tools.
  const texts = entries.map((entry) => embeddingText(entry.text));
  const checkpoint = () => {
    if (options.cancelled?.()) throw new BuildCancelledError('the index build was cancelled');
  };
  const { vectors, embedded } = await embedWithCache(texts, options.embedder, options.cache, options.cancelled && checkpoint);
  checkpoint();
  const index: SearchIndex = {
    catalogHash: snapshot.catalogHash,
    model: options.embedder.modelId,
    builtAt: new Date().toISOString(),
    size: entries.length,
    lexical: LexicalIndex.build(
      entries.map((entry) => ({ name: entry.tool.name, text: entry.text })),
      options.lexical ?? DEFAULT_LEXICAL,
    ),
    vectors: buildVectorIndex(names, vectors, options.hnsw ?? DEFAULT_HNSW, checkpoint),
  };
  return { index, stats: { tools: entries.length, embedded, durationMs: performance.now() - started } };
}

/** Embeds only texts the cache does not have; identical texts in one catalog are embedded once. */
export async function embedWithCache(
  texts: readonly string[],
  embedder: Embedder,
  cache?: EmbeddingCache,
  /** Called between chunks of texts; throws to stop. Without it all missing texts go to the embedder in one call. */
  checkpoint?: () => void,
): Promise<{ vectors: Float32Array[]; embedded: number }> {
  const hashes = texts.map((text) => sha256(text));
  const cached = cache ? await cache.getMany(embedder.cacheKey, hashes) : texts.map(() => undefined);
  const missing = new Map<string, string>();
  hashes.forEach((hash, i) => {
    // A cached vector of another length (a server that changed its model's output under the same name) is re-made.
    if (cached[i] !== undefined && embedder.dimensions > 0 && cached[i]!.length !== embedder.dimensions) cached[i] = undefined;
    if (cached[i] === undefined) missing.set(hash, texts[i]!);
  });
  const fresh = new Map<string, Float32Array>();
  if (missing.size > 0) {
    const missingHashes = [...missing.keys()];
    const missingTexts = [...missing.values()];
    const vectors: Float32Array[] = [];
    const chunk = checkpoint ? EMBED_CHUNK : missingTexts.length;
    for (let start = 0; start < missingTexts.length; start += chunk) {
      checkpoint?.();
      vectors.push(...(await embedder.embed(missingTexts.slice(start, start + chunk))));
    }
    missingHashes.forEach((hash, i) => fresh.set(hash, vectors[i]!));
    await cache?.setMany(
      embedder.cacheKey,
      missingHashes.map((textHash) => ({ textHash, vector: fresh.get(textHash)! })),
    );
  }
  return { vectors: hashes.map((hash, i) => cached[i] ?? fresh.get(hash)!), embedded: missing.size };
}

/**
 * Embeds texts in catalog order, `chunk` at a time, and hands each chunk's vectors on as soon as they exist, so what
 * consumes them (the graph) works while later chunks are embedded; only texts the cache lacks go through the embedder.
 * `textsOf(start, end)` makes a chunk's texts when it is its turn, so all of a catalog's texts never exist at once.
 * Returns how many texts were embedded (cache misses; identical texts within a chunk count once).
 */
export async function embedInChunks(
  count: number,
  textsOf: (start: number, end: number) => string[],
  embedder: Embedder,
  onChunk: (start: number, vectors: Float32Array[]) => void,
  options: { cache?: EmbeddingCache; checkpoint?: () => void; chunk?: number } = {},
): Promise<number> {
  const { cache, checkpoint, chunk = EMBED_CHUNK } = options;
  let embedded = 0;
  for (let start = 0; start < count; start += chunk) {
    checkpoint?.();
    const result = await embedWithCache(textsOf(start, Math.min(count, start + chunk)), embedder, cache);
    embedded += result.embedded;
    checkpoint?.();
    onChunk(start, result.vectors);
  }
  return embedded;
}
