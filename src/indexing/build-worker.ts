/**
 * The worker-thread side of WorkerIndexBuilder: builds BM25 from texts and the vector index from vectors, as they
 * arrive, and posts the parts it was asked for back (see BuiltParts). A large catalog's build runs in two such threads,
 * one per part, so the graph (the longest step) grows beside the BM25 build instead of after it. When the embedder is
 * plain JavaScript (the offline model, Embedder.threadable), BM25's thread also embeds each part of texts it counts and
 * sends the vectors to the graph's thread over a channel of their own; any other embedder (onnxruntime, which does not
 * survive a worker thread's teardown, or a remote API) embeds on the API thread, which sends the vectors.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { embeddingText } from '../catalog/text.js';
import { createEmbedder, type Embedder } from '../embedding/embedder.js';
import { LexicalIndexBuilder, type LexicalParts } from './lexical.js';
import { BuildCancelledError } from './search-index.js';
import hnswlib from 'hnswlib-node';
import { packRows, VectorIndexBuilder } from './vector.js';
import type { BuildCounted, BuildFinish, BuildReply, BuildRequest, BuildTexts, BuildVectors, BuildWorkerData, BuiltParts } from './worker-builder.js';

const { lexical, hnsw, cancel, embedder: embedderOptions } = workerData as BuildWorkerData;
const cancelFlag = new Int32Array(cancel);
const checkpoint = () => {
  if (Atomics.load(cancelFlag, 0) === 1) throw new BuildCancelledError('the index build was cancelled');
};
// Loaded from the start, while the first texts are on their way.
const embedderReady: Promise<Embedder> | undefined = embedderOptions ? createEmbedder(embedderOptions) : undefined;
embedderReady?.catch(() => undefined);

/**
 * Builds in progress. Texts are counted into BM25 (and embedded, in the thread that embeds) as each part comes and then
 * let go; vector rows go into the graph as each chunk comes. The first error is kept and reported with the build's
 * reply; later messages of a failed build are ignored.
 */
interface Build {
  /** Texts received, counted or not (after an error they are only counted here). */
  texts: number;
  /** Texts embedded here. */
  embedded: number;
  lexical?: LexicalIndexBuilder;
  vectors?: VectorIndexBuilder;
  /** Where this thread sends the vectors it makes. */
  vectorsOut?: MessagePort;
  /** The graph's thread, told to finish: resolves once every row has come (they come over the channel). */
  rowsComplete?: () => void;
  /** Reusing a previous graph: how many rows will be replaced, and how many have been. */
  replacing?: { expected: number; done: number };
  error?: Error;
}
const builds = new Map<number, Build>();

function buildOf(id: number): Build {
  let build = builds.get(id);
  if (build === undefined) {
    build = { texts: 0, embedded: 0 };
    builds.set(id, build);
  }
  return build;
}

// Messages are handled one at a time, in order: embedding a part is asynchronous, and the next part, or the finish,
// must wait for it. A build's set-up (its channel, a graph to reuse) is taken at once, before any vectors can come.
let queue: Promise<void> = Promise.resolve();
parentPort!.on('message', (request: BuildRequest) => {
  if (request.kind === 'connect' || request.kind === 'reuse') void handle(request);
  else queue = queue.then(() => handle(request));
});

async function handle(request: BuildRequest): Promise<void> {
  if (request.kind === 'drop') {
    builds.delete(request.id);
    return;
  }
  if (request.kind === 'connect') {
    const build = buildOf(request.id);
    if (request.vectors === 'send') build.vectorsOut = request.port;
    else request.port.on('message', (vectors: BuildVectors) => addVectors(vectors));
    return;
  }
  if (request.kind === 'reuse') {
    const build = buildOf(request.id);
    step(build, () => {
      const graph = new hnswlib.HierarchicalNSW('cosine', request.dimensions);
      graph.readIndexSync(request.file);
      build.vectors = new VectorIndexBuilder(request.total, request.dimensions, hnsw, checkpoint, graph);
      build.replacing = { expected: request.changed, done: 0 };
    });
    return;
  }
  if (request.kind === 'texts') return countTexts(request);
  if (request.kind === 'vectors') return addVectors(request);
  let reply: BuildReply;
  try {
    reply = await finish(request);
  } catch (error) {
    reply = { id: request.id, error: error instanceof Error ? error.message : String(error) };
  } finally {
    const build = builds.get(request.id);
    build?.vectorsOut?.close();
    builds.delete(request.id);
  }
  const transfer = 'error' in reply ? [] : [...(reply.lexical ? lexicalBuffers(reply.lexical) : []), ...(reply.vectors?.kind === 'exact' ? [reply.vectors.matrix] : [])];
  parentPort!.postMessage(reply, transfer);
}

async function countTexts(request: BuildTexts): Promise<void> {
  const build = buildOf(request.id);
  step(build, () => {
    build.lexical ??= new LexicalIndexBuilder(lexical);
    for (let i = 0; i < request.names.length; i++) build.lexical.add(request.names[i]!, request.texts[i]!);
  });
  if (build.vectorsOut && !build.error) {
    try {
      checkpoint();
      const embedder = await embedderReady!;
      // Only the changed texts when the graph of a previous build is reused.
      const labels = request.embed?.filter((label) => label >= request.start && label < request.start + request.texts.length);
      const texts = labels ? labels.map((label) => request.texts[label - request.start]!) : request.texts;
      const vectors = texts.length === 0 ? [] : await embedder.embed(texts.map(embeddingText));
      const width = embedder.dimensions;
      const rows = packRows(vectors, width);
      build.embedded += vectors.length;
      const message: BuildVectors = {
        kind: 'vectors',
        id: request.id,
        total: request.total,
        start: request.start,
        vectors: rows.buffer as ArrayBuffer,
        dimensions: width,
        ...(labels ? { labels: Uint32Array.from(labels).buffer } : {}),
      };
      if (vectors.length > 0) build.vectorsOut.postMessage(message, [message.vectors, ...(message.labels ? [message.labels] : [])]);
    } catch (error) {
      build.error ??= error instanceof Error ? error : new Error(String(error));
    }
  }
  // The API thread sends the next parts as this one is taken in (see WorkerIndexBuilder.build).
  build.texts += request.names.length;
  parentPort!.postMessage({ id: request.id, counted: build.texts } satisfies BuildCounted);
}

function addVectors(request: BuildVectors): void {
  const build = buildOf(request.id);
  step(build, () => {
    build.vectors ??= new VectorIndexBuilder(request.total, request.dimensions, hnsw, checkpoint);
    const rows = new Float32Array(request.vectors);
    if (!request.labels) return build.vectors.addRows(request.start, rows);
    const labels = new Uint32Array(request.labels);
    const width = request.dimensions;
    labels.forEach((label, row) => build.vectors!.replace(label, rows.subarray(row * width, (row + 1) * width)));
    if (build.replacing) build.replacing.done += labels.length;
  });
  if (build.rowsComplete && (build.error || rowsIn(build, request.total))) build.rowsComplete();
}

/** Whether every row the graph waits for has come: all of them, or the changed ones when a previous graph is reused. */
function rowsIn(build: Build, total: number): boolean {
  return build.replacing ? build.replacing.done >= build.replacing.expected : (build.vectors?.added ?? 0) >= total;
}

function step(build: Build, work: () => void): void {
  if (build.error) return;
  try {
    checkpoint();
    work();
  } catch (error) {
    build.error = error instanceof Error ? error : new Error(String(error));
  }
}

async function finish({ id, parts, total, dimensions }: BuildFinish): Promise<BuiltParts> {
  checkpoint();
  const build = builds.get(id) ?? buildOf(id);
  if (parts.includes('vectors') && total > 0 && !rowsIn(build, total) && !build.error) {
    // Rows still on their way over the channel from the thread that embeds: they arrive as their own messages.
    await new Promise<void>((resolve) => (build.rowsComplete = resolve));
  }
  if (build.error) throw build.error;
  const reply: BuiltParts = { id, ...(build.vectorsOut ? { embedded: build.embedded } : {}) };
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
