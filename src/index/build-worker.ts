/**
 * The worker-thread side of WorkerIndexBuilder: embeds, builds BM25 and HNSW for one catalog at a time and posts the
 * index back as an artifact buffer (transferred, not copied). Runs the same build as the in-process builder; only the
 * thread differs, so catalog-sized work never holds up the API's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { CatalogEntry } from '../catalog/catalog.js';
import { createEmbedder, type Embedder } from '../embedding/embedder.js';
import { serializeIndex } from './artifact.js';
import { MemoryEmbeddingCache } from './embedding-cache.js';
import { buildSearchIndex } from './search-index.js';
import type { BuildReply, BuildRequest, BuildWorkerData } from './worker-builder.js';

const { embedding, lexical, hnsw, cancel } = workerData as BuildWorkerData;
const cancelFlag = new Int32Array(cancel);
const cancelled = () => Atomics.load(cancelFlag, 0) === 1;
let embedder: Promise<Embedder> | undefined;
// Kept across builds, so a catalog change re-embeds only the tools whose text changed.
const cache = new MemoryEmbeddingCache();

parentPort!.on('message', (request: BuildRequest) => {
  void build(request).then(
    (reply) => parentPort!.postMessage(reply, 'artifact' in reply ? [reply.artifact] : []),
    (error: unknown) => parentPort!.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) } satisfies BuildReply),
  );
});

async function build({ id, catalogHash, entries }: BuildRequest): Promise<BuildReply> {
  if (cancelled()) throw new Error('the index builder is closed');
  embedder ??= createEmbedder(embedding);
  // Only what the build reads crosses the thread boundary; the rest of CatalogEntry is not needed here.
  const snapshot = { catalogHash, entries: entries.map(([name, text]) => ({ tool: { name }, text }) as CatalogEntry) };
  const { index, stats } = await buildSearchIndex(snapshot, { embedder: await embedder, cache, lexical, hnsw, cancelled });
  const bytes = serializeIndex(index, hnsw);
  // A Buffer may be a view into a shared pool; a transferable copy owns exactly its bytes.
  const artifact = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes.buffer : bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  return { id, artifact: artifact as ArrayBuffer, stats };
}
