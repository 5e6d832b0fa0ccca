/**
 * The worker-thread side of WorkerIndexBuilder: builds BM25 from texts and the vector index from vectors the API thread
 * embedded, as they arrive, and posts the parts it was asked for back (see BuiltParts). A large catalog's build runs in
 * two such threads, one per part, so the graph (the longest step) grows beside the BM25 build instead of after it.
 * The embedding model stays out of these threads: onnxruntime does not survive a worker thread's teardown (heap
 * corruption or a hang at exit), and a second copy of the model would double the API's memory.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LexicalIndexBuilder, type LexicalParts } from './lexical.js';
import { BuildCancelledError } from './search-index.js';
import { VectorIndexBuilder } from './vector.js';
import type { BuildCounted, BuildFinish, BuildReply, BuildRequest, BuildWorkerData, BuiltParts } from './worker-builder.js';

const { lexical, hnsw, cancel } = workerData as BuildWorkerData;
const cancelFlag = new Int32Array(cancel);
const checkpoint = () => {
  if (Atomics.load(cancelFlag, 0) === 1) throw new BuildCancelledError('the index build was cancelled');
};

/**
 * Builds in progress. Texts are counted into BM25 as each part comes and then let go; vector rows go into the graph as
 * each chunk comes. The first error is kept and reported with the build's reply; later messages of a failed build are
 * ignored.
 */
interface Build {
  /** Texts received, counted or not (after an error they are only counted here). */
  texts: number;
  lexical?: LexicalIndexBuilder;
  vectors?: VectorIndexBuilder;
  error?: Error;
}
const builds = new Map<number, Build>();

function buildOf(id: number): Build {
  let build = builds.get(id);
  if (build === undefined) {
    build = { texts: 0 };
    builds.set(id, build);
  }
  return build;
}

parentPort!.on('message', (request: BuildRequest) => {
  if (request.kind === 'drop') {
    builds.delete(request.id);
    return;
  }
  if (request.kind === 'texts') {
    const build = buildOf(request.id);
    step(build, () => {
      build.lexical ??= new LexicalIndexBuilder(lexical);
      for (let i = 0; i < request.names.length; i++) build.lexical.add(request.names[i]!, request.texts[i]!);
    });
    // The API thread sends the next parts as this one is taken in (see WorkerIndexBuilder.build).
    build.texts += request.names.length;
    parentPort!.postMessage({ id: request.id, counted: build.texts } satisfies BuildCounted);
    return;
  }
  if (request.kind === 'vectors') {
    const build = buildOf(request.id);
    step(build, () => {
      build.vectors ??= new VectorIndexBuilder(request.total, request.dimensions, hnsw, checkpoint);
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
  const transfer = 'error' in reply ? [] : [...(reply.lexical ? lexicalBuffers(reply.lexical) : []), ...(reply.vectors?.kind === 'exact' ? [reply.vectors.matrix] : [])];
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

function finish({ id, parts, total, dimensions }: BuildFinish): BuiltParts {
  checkpoint();
  const build = builds.get(id) ?? { texts: 0 };
  if (build.error) throw build.error;
  const reply: BuiltParts = { id };
  if (parts.includes('lexical')) {
    // No texts came when the catalog is empty.
    const lexicalIndex = (build.lexical ?? new LexicalIndexBuilder(lexical)).finish();
    if (lexicalIndex.size !== total) throw new Error(`index build ${id}: ${lexicalIndex.size} of ${total} texts arrived`);
    build.lexical = undefined;
    checkpoint();
    reply.lexical = lexicalIndex.parts();
  }
  if (parts.includes('vectors')) {
    // No vectors came when the catalog is empty.
    const built = (build.vectors ?? new VectorIndexBuilder(total, dimensions, hnsw, checkpoint)).built();
    checkpoint();
    if ('matrix' in built) {
      reply.vectors = { kind: 'exact', matrix: owned(built.matrix), dimensions };
    } else {
      // A private directory per build; the API thread removes it once it has read the graph.
      const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-index-'));
      try {
        const file = path.join(dir, 'graph.bin');
        built.graph.writeIndexSync(file);
        reply.vectors = { kind: 'hnsw', dir, file, dimensions: built.graph.getNumDimensions() };
      } catch (error) {
        rmSync(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }
  return reply;
}

/** The lexical index's arrays, each its own buffer (made so by the builder), to transfer with the reply. */
function lexicalBuffers(parts: LexicalParts): ArrayBuffer[] {
  const arrays = [parts.postingStart, parts.docs, parts.tfs, parts.fieldLengths, parts.averageFieldLengths];
  const buffers = arrays.map((array) => array.buffer as ArrayBuffer);
  // A view into a shared buffer cannot be transferred without taking the rest along; then it is cloned instead.
  return arrays.every((array, i) => array.byteOffset === 0 && array.byteLength === buffers[i]!.byteLength) && new Set(buffers).size === buffers.length ? buffers : [];
}

/** A typed array's bytes as an ArrayBuffer of their own, to transfer: a view into a larger (or pooled) buffer is copied. */
function owned(bytes: ArrayBufferView): ArrayBuffer {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    ? (bytes.buffer as ArrayBuffer)
    : (bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer);
}
