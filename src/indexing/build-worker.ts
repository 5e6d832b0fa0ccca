/**
 * The worker-thread side of WorkerIndexBuilder: builds BM25 and the HNSW graph from texts and vectors the API thread
 * embedded, and posts the index back in parts (see BuiltParts). The embedding model stays out of
 * this thread: onnxruntime does not survive a worker thread's teardown (heap corruption or a hang at exit), and a
 * second copy of the model would double the API's memory.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LexicalIndex } from './lexical.js';
import { BuildCancelledError, type SearchIndex } from './search-index.js';
import { ExactVectorIndex, HnswVectorIndex, VectorIndexBuilder } from './vector.js';
import type { BuildFinish, BuildReply, BuildRequest, BuildWorkerData } from './worker-builder.js';
import type { SearchableText } from '../catalog/text.js';

const { lexical, hnsw, cancel } = workerData as BuildWorkerData;
const cancelFlag = new Int32Array(cancel);
const checkpoint = () => {
  if (Atomics.load(cancelFlag, 0) === 1) throw new BuildCancelledError('the index build was cancelled');
};

/**
 * Builds in progress: BM25 from the texts, the vector index growing as chunks arrive. The first error is kept and
 * reported with the build's reply; later messages of a failed build are ignored.
 */
interface Build {
  names: string[];
  /** Texts received so far (BM25 is built once all have come). */
  texts: SearchableText[];
  lexical?: LexicalIndex;
  vectors?: VectorIndexBuilder;
  error?: Error;
}
const builds = new Map<number, Build>();

parentPort!.on('message', (request: BuildRequest) => {
  if (request.kind === 'drop') {
    builds.delete(request.id);
    return;
  }
  if (request.kind === 'texts') {
    let build = builds.get(request.id);
    if (build === undefined) {
      build = { names: [], texts: [] };
      builds.set(request.id, build);
    }
    for (const name of request.names) build.names.push(name);
    for (const text of request.texts) build.texts.push(text);
    if (build.names.length < request.total) return;
    // Built now, while the API thread embeds; the vector chunks sent meanwhile wait in this thread's queue.
    const complete = build;
    step(complete, () => {
      const { names, texts } = complete;
      complete.lexical = LexicalIndex.build(
        names.map((name, i) => ({ name, text: texts[i]! })),
        lexical,
      );
      complete.texts = [];
    });
    return;
  }
  if (request.kind === 'vectors') {
    const build = builds.get(request.id);
    if (build === undefined) return;
    step(build, () => {
      build.vectors ??= new VectorIndexBuilder(build.names, request.dimensions, hnsw, checkpoint);
      build.vectors.addRows(request.start, new Float32Array(request.vectors));
    });
    return;
  }
  let reply: BuildReply;
  try {
    reply = finish(request);
  } catch (error) {
    reply = { id: request.id, error: error instanceof Error ? error.message : String(error) };
  } finally {
    builds.delete(request.id);
  }
  const transfer = 'error' in reply ? [] : [reply.lexical, ...(reply.vectors.kind === 'exact' ? [reply.vectors.matrix] : [])];
  parentPort!.postMessage(reply, transfer);
});

function step(build: Build, work: () => void): void {
  if (build.error) return;
  try {
    checkpoint();
    work();
  } catch (error) {
    build.error = error instanceof Error ? error : new Error(String(error));
  }
}

function finish({ id, catalogHash, model, builtAt, dimensions }: BuildFinish): BuildReply {
  checkpoint();
  const build = builds.get(id);
  if (build === undefined) throw new Error(`index build ${id}: the texts never arrived`);
  if (build.error) throw build.error;
  const { names } = build;
  // No vectors came when the catalog is empty.
  const vectors = build.vectors ?? new VectorIndexBuilder(names, dimensions, hnsw, checkpoint);
  const index: SearchIndex = {
    catalogHash,
    model,
    builtAt,
    size: names.length,
    lexical: build.lexical!,
    vectors: vectors.finish(),
  };
  checkpoint();
  const lexicalBytes = index.lexical.serialize();
  const built = index.vectors;
  if (built instanceof ExactVectorIndex) {
    return { id, lexical: owned(lexicalBytes), vectors: { kind: 'exact', matrix: owned(built.matrix), dimensions: built.dimensions } };
  }
  if (!(built instanceof HnswVectorIndex)) throw new Error('unknown vector index type');
  // A private directory per build; the API thread removes it once it has read the graph.
  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-index-'));
  try {
    const file = path.join(dir, 'graph.bin');
    built.index.writeIndexSync(file);
    return { id, lexical: owned(lexicalBytes), vectors: { kind: 'hnsw', dir, file, dimensions: built.index.getNumDimensions() } };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/** A typed array's bytes as an ArrayBuffer of their own, to transfer: a view into a larger (or pooled) buffer is copied. */
function owned(bytes: ArrayBufferView): ArrayBuffer {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    ? (bytes.buffer as ArrayBuffer)
    : (bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer);
}
