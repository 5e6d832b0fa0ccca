import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { rm } from 'node:fs/promises';
import type { CatalogSnapshot } from '../catalog/catalog.js';
import { embeddingText, type SearchableText } from '../catalog/text.js';
import type { Embedder } from '../embedding/embedder.js';
import type { EmbeddingCache } from './embedding-cache.js';
import { LexicalIndex, type LexicalSettings } from './lexical.js';
import type { IndexBuilder } from './local-pipeline.js';
import { embedInChunks, type BuildStats, type SearchIndex } from './search-index.js';
import { ExactVectorIndex, HnswVectorIndex, type HnswSettings, type VectorIndex } from './vector.js';

/** What the build thread is started with: the configuration slices a build needs (plain data). */
export interface BuildWorkerData {
  lexical: LexicalSettings;
  hnsw: HnswSettings;
  /** One Int32; set to 1 to make the thread abandon its build at the next checkpoint. */
  cancel: SharedArrayBuffer;
}

/**
 * A build comes as a stream of messages with the same id, so the thread works while this thread embeds: first the
 * texts (the thread builds BM25 at once), then the vectors a chunk at a time in catalog order (the graph grows as they
 * come), then `finish` (the built index, see BuiltParts). `drop` abandons a build whose embedding failed.
 */
export type BuildRequest = BuildTexts | BuildVectors | BuildFinish | { kind: 'drop'; id: number };

export interface BuildTexts {
  kind: 'texts';
  id: number;
  /** Per catalog entry of this part, in catalog order: its name and its searchable text. */
  names: string[];
  texts: SearchableText[];
  /** Catalog size: the thread builds BM25 once it has this many texts (they come in parts of TEXTS_PART). */
  total: number;
}

/**
 * Entries per `texts` message: posting a message clones it synchronously, and 100,000 tools' texts in one took over
 * 100 ms of this thread (every request waited); parts of this size take a few ms each, with the event loop free between.
 */
const TEXTS_PART = 5_000;

export interface BuildVectors {
  kind: 'vectors';
  id: number;
  /** Catalog position of the first row. */
  start: number;
  /** rows × dimensions float32 values, row-major (transferred). */
  vectors: ArrayBuffer;
  dimensions: number;
}

export interface BuildFinish {
  kind: 'finish';
  id: number;
  catalogHash: string;
  model: string;
  builtAt: string;
  /** Of the vectors sent (the embedder's, when the catalog is empty). */
  dimensions: number;
}

/**
 * A built index handed to this thread in parts rather than as one artifact: the BM25 section (transferred), and the
 * vectors as a matrix (transferred) or as the graph file hnswlib wrote (hnswlib-node reads and writes graphs only as
 * files). An artifact would cost two more copies of the graph on the way (the thread reading the file back into one
 * buffer, this thread writing it out again to load it) and twice its size in memory while they exist.
 */
export type BuiltParts = {
  id: number;
  lexical: ArrayBuffer;
  vectors: { kind: 'exact'; matrix: ArrayBuffer; dimensions: number } | { kind: 'hnsw'; dir: string; file: string; dimensions: number };
};

export type BuildReply = BuiltParts | { id: number; error: string };

/**
 * The in-process pipeline's builder (no Redis configured). BM25 and the HNSW graph for 100k tools take tens of seconds
 * of synchronous CPU, which on the API's thread would stall every request for as long; they run in a worker thread.
 * Embedding stays on this thread: the model already lives here for queries, and the texts go through it a batch at a
 * time with the event loop free in between (the embedder yields after each batch), in chunks whose vectors go to the
 * thread at once. A thread is started per build and ended as soon as it has answered: what it held while building (the
 * BM25 build's maps and texts, the graph) is then returned with its heap, instead of staying resident in an idle
 * thread (over 100 MB after a 100k-tool build); starting one costs less than a second, overlapped with embedding. If
 * it dies, the build in flight fails.
 */
export class WorkerIndexBuilder implements IndexBuilder {
  private worker: Worker | undefined;
  private nextId = 0;
  private closed = false;
  private readonly cancel = new SharedArrayBuffer(4);
  /** Threads already told to end. */
  private readonly retired = new WeakSet<Worker>();
  /** Builds waiting for their reply, with the thread each was sent to. */
  private readonly waiting = new Map<number, { worker: Worker; resolve: (reply: BuildReply) => void; reject: (error: Error) => void }>();

  constructor(
    private readonly options: Omit<BuildWorkerData, 'cancel'> & {
      embedder: Embedder;
      cache?: EmbeddingCache;
      onBuilt?: (stats: BuildStats, index: SearchIndex) => void;
    },
  ) {}

  async build(snapshot: CatalogSnapshot): Promise<SearchIndex> {
    if (this.closed) throw new Error('the index builder is closed');
    const started = performance.now();
    const { entries } = snapshot;
    const { embedder, cache } = this.options;
    const id = this.nextId++;
    // Started now, the thread boots (hundreds of ms of module loading) while this thread embeds the first chunk.
    const worker = this.thread();
    const reply = new Promise<BuildReply>((resolve, reject) => this.waiting.set(id, { worker, resolve, reject }));
    try {
      // The thread may die while this thread still embeds; the failure is read where the reply is awaited.
      reply.catch(() => undefined);
      // A remote embedder may learn its dimensions from its first answer; the first chunk settles them for the build.
      let dimensions: number | undefined;
      const names = entries.map((entry) => entry.tool.name);
      for (let start = 0; start === 0 || start < entries.length; start += TEXTS_PART) {
        await new Promise((resolve) => setImmediate(resolve));
        const part = entries.slice(start, start + TEXTS_PART);
        const message: BuildTexts = { kind: 'texts', id, names: names.slice(start, start + TEXTS_PART), texts: part.map((entry) => entry.text), total: entries.length };
        worker.postMessage(message);
      }
      let embedded: number;
      try {
        embedded = await embedInChunks(
          entries.length,
          (start, end) => entries.slice(start, end).map((entry) => embeddingText(entry.text)),
          embedder,
          (start, vectors) => {
            const width = (dimensions ??= vectors[0]?.length ?? embedder.dimensions);
            const rows = new Float32Array(vectors.length * width);
            vectors.forEach((vector, row) => {
              if (vector.length !== width) throw new Error(`the embedder returned ${vector.length} dimensions, expected ${width}`);
              rows.set(vector, row * width);
            });
            const message: BuildVectors = { kind: 'vectors', id, start, vectors: rows.buffer as ArrayBuffer, dimensions: width };
            worker.postMessage(message, [message.vectors]);
          },
          {
            ...(cache ? { cache } : {}),
            checkpoint: () => {
              if (this.closed) throw new Error('the index builder is closed');
            },
          },
        );
      } catch (error) {
        this.waiting.delete(id);
        worker.postMessage({ kind: 'drop', id } satisfies BuildRequest);
        throw error;
      }
      const finish: BuildFinish = {
        kind: 'finish',
        id,
        catalogHash: snapshot.catalogHash,
        model: embedder.modelId,
        builtAt: new Date().toISOString(),
        dimensions: dimensions ?? embedder.dimensions,
      };
      // The thread that got the texts: if it died meanwhile, the reply above has already failed.
      worker.postMessage(finish);
      const answer = await reply;
      // Everything the index needs is here now: the thread's memory goes while this thread loads the parts.
      this.retire(worker);
      if ('error' in answer) throw new Error(answer.error);
      const index = await this.load(answer, finish, names);
      this.options.onBuilt?.({ tools: entries.length, embedded, durationMs: performance.now() - started }, index);
      return index;
    } finally {
      this.retire(worker);
    }
  }

  /**
   * Stops the thread; a build in flight is abandoned at its next checkpoint (within about a second), not waited out.
   * The thread is asked first and terminated once it has stopped (or after `graceMs`), never inside hnswlib's code.
   */
  async close(graceMs = 10_000): Promise<void> {
    this.closed = true;
    Atomics.store(new Int32Array(this.cancel), 0, 1);
    const worker = this.worker;
    this.worker = undefined;
    if (!worker) return;
    // Bounded: polls every 20 ms for at most graceMs.
    const deadline = performance.now() + graceMs;
    while (this.waiting.size > 0 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await worker.terminate();
  }

  /** Whether a build thread is running now (started by a build, ended when it is done or by close). */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /**
   * The only part of a build on this thread: reading the parts, with the event loop free between the BM25 section and
   * the graph (each a few hundred ms at 100k tools). The graph's temp directory goes whatever happens.
   */
  private async load(parts: BuiltParts, finish: BuildFinish, names: string[]): Promise<SearchIndex> {
    const { vectors } = parts;
    try {
      const lexical = LexicalIndex.deserialize(Buffer.from(parts.lexical), this.options.lexical);
      await new Promise((resolve) => setImmediate(resolve));
      const { hnsw } = this.options;
      let vectorIndex: VectorIndex;
      if (vectors.kind === 'exact') {
        vectorIndex = new ExactVectorIndex(names, { matrix: new Float32Array(vectors.matrix), dimensions: vectors.dimensions });
      } else {
        vectorIndex = HnswVectorIndex.read(names, vectors.file, vectors.dimensions, hnsw.efSearch, hnsw.exactThreshold);
      }
      return { catalogHash: finish.catalogHash, model: finish.model, builtAt: finish.builtAt, size: names.length, lexical, vectors: vectorIndex };
    } finally {
      if (vectors.kind === 'hnsw') await rm(vectors.dir, { recursive: true, force: true });
    }
  }

  /** Ends a thread no build waits on; one a newer build has been sent to stays. */
  private retire(worker: Worker): void {
    if (this.retired.has(worker) || [...this.waiting.values()].some((pending) => pending.worker === worker)) return;
    this.retired.add(worker);
    if (this.worker === worker) this.worker = undefined;
    void worker.terminate();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const { lexical, hnsw } = this.options;
    const worker = startThread(workerFile(), { lexical, hnsw, cancel: this.cancel });
    // A build thread alone must not keep the process running.
    worker.unref();
    // Only this thread's builds fail with it: a retired thread's exit comes after the next build has its own thread.
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = undefined;
      for (const [id, pending] of this.waiting) {
        if (pending.worker !== worker) continue;
        this.waiting.delete(id);
        pending.reject(error);
      }
    };
    worker.on('message', (reply: BuildReply) => {
      const pending = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      pending?.resolve(reply);
    });
    worker.on('error', (error: unknown) => fail(new Error(`index build thread failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error })));
    worker.on('exit', (code) => fail(new Error(`index build thread exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }
}

/**
 * The thread's module, next to this one and with this module's extension: `.js` when run from the compiled `dist/`,
 * `.ts` when run through tsx (tests, `npm run dev`).
 */
function workerFile(): URL {
  const extension = path.extname(fileURLToPath(import.meta.url));
  return new URL(`./build-worker${extension}`, import.meta.url);
}

/**
 * Compiled JavaScript loads directly. TypeScript needs tsx in the thread too: a Worker inherits `--import tsx` in its
 * execArgv, but on Node 20 the loader hooks that flag registers do not reach worker threads, so the thread registers
 * tsx's loader itself before importing the module (tsx is resolved here, where it is known to be loaded).
 */
function startThread(file: URL, workerData: BuildWorkerData): Worker {
  if (!file.pathname.endsWith('.ts')) return new Worker(file, { workerData });
  const tsx = import.meta.resolve('tsx/esm/api');
  const bootstrap = `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(file.href)}); });`;
  return new Worker(bootstrap, { eval: true, workerData });
}
