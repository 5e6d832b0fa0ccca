import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CatalogSnapshot } from '../catalog/catalog.js';
import { embeddingText, type SearchableText } from '../catalog/text.js';
import type { Embedder } from '../embedding/embedder.js';
import { deserializeIndex } from './artifact.js';
import type { EmbeddingCache } from './embedding-cache.js';
import type { LexicalSettings } from './lexical.js';
import type { IndexBuilder } from './local-pipeline.js';
import { embedWithCache, type BuildStats, type SearchIndex } from './search-index.js';
import type { HnswSettings } from './vector.js';

/** What the build thread is started with: the configuration slices a build needs (plain data). */
export interface BuildWorkerData {
  lexical: LexicalSettings;
  hnsw: HnswSettings;
  /** One Int32; set to 1 to make the thread abandon its build at the next checkpoint. */
  cancel: SharedArrayBuffer;
}

/**
 * A build comes in two messages with the same id, so BM25 is built while this thread embeds: first the texts (the
 * thread starts on the lexical index at once), then the vectors (the graph, then the artifact). `drop` abandons a build
 * whose embedding failed.
 */
export type BuildRequest = BuildTexts | BuildVectors | { kind: 'drop'; id: number };

export interface BuildTexts {
  kind: 'texts';
  id: number;
  /** Per catalog entry, in catalog order: its name and its searchable text. */
  names: string[];
  texts: SearchableText[];
}

export interface BuildVectors {
  kind: 'vectors';
  id: number;
  catalogHash: string;
  model: string;
  builtAt: string;
  /** names.length × dimensions float32 values, row-major (transferred). */
  vectors: ArrayBuffer;
  dimensions: number;
}

export type BuildReply = { id: number; artifact: ArrayBuffer } | { id: number; error: string };

/**
 * The in-process pipeline's builder (no Redis configured). BM25 and the HNSW graph for 100k tools take tens of seconds
 * of synchronous CPU, which on the API's thread would stall every request for as long; they run in a worker thread.
 * Embedding stays on this thread: the model already lives here for queries, its inference runs off the event loop in
 * onnxruntime's own threads, and the texts go through it in batches with the event loop free in between. The thread is
 * started on the first build and kept; if it dies, the build in flight fails and the next one starts a new thread.
 */
export class WorkerIndexBuilder implements IndexBuilder {
  private worker: Worker | undefined;
  private nextId = 0;
  private closed = false;
  private readonly cancel = new SharedArrayBuffer(4);
  private readonly waiting = new Map<number, { resolve: (reply: BuildReply) => void; reject: (error: Error) => void }>();

  constructor(
    private readonly options: Omit<BuildWorkerData, 'cancel'> & {
      embedder: Embedder;
      cache?: EmbeddingCache;
      onBuilt?: (stats: BuildStats, index: SearchIndex) => void;
    },
  ) {}

  async build(snapshot: CatalogSnapshot): Promise<SearchIndex> {
    if (this.closed) throw new Error('the index builder is closed');
    // Started now, the thread boots (hundreds of ms of module loading) while this thread embeds.
    this.thread();
    const started = performance.now();
    const { entries } = snapshot;
    const { embedder, cache } = this.options;
    const id = this.nextId++;
    const reply = new Promise<BuildReply>((resolve, reject) => this.waiting.set(id, { resolve, reject }));
    // The thread may die while this thread still embeds; the failure is read where the reply is awaited.
    reply.catch(() => undefined);
    // The texts go first: the thread builds BM25 while this thread embeds (the two used to run one after the other).
    const texts: BuildTexts = { kind: 'texts', id, names: entries.map((entry) => entry.tool.name), texts: entries.map((entry) => entry.text) };
    this.thread().postMessage(texts);
    let matrix: Float32Array;
    let embedded: number;
    let dimensions: number;
    try {
      const result = await embedWithCache(
        entries.map((entry) => embeddingText(entry.text)),
        embedder,
        cache,
      );
      if (this.closed) throw new Error('the index builder is closed');
      embedded = result.embedded;
      dimensions = result.vectors[0]?.length ?? embedder.dimensions;
      matrix = new Float32Array(entries.length * dimensions);
      result.vectors.forEach((vector, row) => matrix.set(vector, row * dimensions));
    } catch (error) {
      this.waiting.delete(id);
      this.worker?.postMessage({ kind: 'drop', id } satisfies BuildRequest);
      throw error;
    }
    const request: BuildVectors = {
      kind: 'vectors',
      id,
      catalogHash: snapshot.catalogHash,
      model: embedder.modelId,
      builtAt: new Date().toISOString(),
      vectors: matrix.buffer as ArrayBuffer,
      dimensions,
    };
    // The thread that got the texts: if it died meanwhile, the reply above has already failed.
    this.worker?.postMessage(request, [request.vectors]);
    const answer = await reply;
    if ('error' in answer) throw new Error(answer.error);
    // The artifact is the same format a BullMQ worker stores in Redis; loading it is the only part on this thread.
    const index = deserializeIndex(Buffer.from(answer.artifact), this.options.lexical);
    this.options.onBuilt?.({ tools: entries.length, embedded, durationMs: performance.now() - started }, index);
    return index;
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

  /** Whether a build thread is running now (started by the first build, ended by close). */
  get running(): boolean {
    return this.worker !== undefined;
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const { lexical, hnsw } = this.options;
    const worker = startThread(workerFile(), { lexical, hnsw, cancel: this.cancel });
    // A build thread alone must not keep the process running.
    worker.unref();
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = undefined;
      for (const pending of this.waiting.values()) pending.reject(error);
      this.waiting.clear();
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
