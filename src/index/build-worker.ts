/**
 * The worker-thread side of WorkerIndexBuilder: builds BM25 and the HNSW graph from texts and vectors the API thread
 * embedded, and posts the index back as an artifact buffer (transferred, not copied). The embedding model stays out of
 * this thread: onnxruntime does not survive a worker thread's teardown (heap corruption or a hang at exit), and a
 * second copy of the model would double the API's memory.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { serializeIndex } from './artifact.js';
import { LexicalIndex } from './lexical.js';
import { BuildCancelledError, type SearchIndex } from './search-index.js';
import { buildVectorIndex } from './vector.js';
import type { BuildReply, BuildRequest, BuildVectors, BuildWorkerData } from './worker-builder.js';

const { lexical, hnsw, cancel } = workerData as BuildWorkerData;
const cancelFlag = new Int32Array(cancel);
const checkpoint = () => {
  if (Atomics.load(cancelFlag, 0) === 1) throw new BuildCancelledError('the index build was cancelled');
};

/** BM25 indexes built from a build's texts, waiting for its vectors. */
const lexicalByBuild = new Map<number, { names: string[]; lexical: LexicalIndex } | Error>();

parentPort!.on('message', (request: BuildRequest) => {
  if (request.kind === 'drop') {
    lexicalByBuild.delete(request.id);
    return;
  }
  if (request.kind === 'texts') {
    // Built now, while the API thread embeds; an error is kept and reported with the build's reply.
    try {
      checkpoint();
      const { names, texts } = request;
      lexicalByBuild.set(request.id, { names, lexical: LexicalIndex.build(names.map((name, i) => ({ name, text: texts[i]! })), lexical) });
    } catch (error) {
      lexicalByBuild.set(request.id, error instanceof Error ? error : new Error(String(error)));
    }
    return;
  }
  let reply: BuildReply;
  try {
    reply = build(request);
  } catch (error) {
    reply = { id: request.id, error: error instanceof Error ? error.message : String(error) };
  } finally {
    lexicalByBuild.delete(request.id);
  }
  parentPort!.postMessage(reply, 'artifact' in reply ? [reply.artifact] : []);
});

function build({ id, catalogHash, model, builtAt, vectors, dimensions }: BuildVectors): BuildReply {
  checkpoint();
  const built = lexicalByBuild.get(id);
  if (built === undefined) throw new Error(`index build ${id}: the texts never arrived`);
  if (built instanceof Error) throw built;
  const { names } = built;
  const matrix = new Float32Array(vectors);
  const rows = names.map((_, row) => matrix.subarray(row * dimensions, (row + 1) * dimensions));
  const index: SearchIndex = {
    catalogHash,
    model,
    builtAt,
    size: names.length,
    lexical: built.lexical,
    vectors: buildVectorIndex(names, rows, hnsw, checkpoint),
  };
  checkpoint();
  const bytes = serializeIndex(index, hnsw);
  // A Buffer may be a view into a shared pool; a transferable copy owns exactly its bytes.
  const artifact =
    bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
      ? (bytes.buffer as ArrayBuffer)
      : (bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer);
  return { id, artifact };
}
