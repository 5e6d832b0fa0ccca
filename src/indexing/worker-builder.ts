import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel, Worker, type MessagePort, type Transferable } from 'node:worker_threads';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { CatalogSnapshot } from '../catalog/catalog.js';
import { embeddingText, type SearchableText } from '../catalog/text.js';
import type { Embedder } from '../embedding/embedder.js';
import type { ThreadableEmbedder } from '../embedding/types.js';
import type { EmbeddingCache } from './embedding-cache.js';
import { LexicalIndex, type LexicalParts, type LexicalSettings } from './lexical.js';
import type { IndexBuilder } from './local-pipeline.js';
import { embedInChunks, embedWithCache, type BuildStats, type SearchIndex } from './search-index.js';
import { ExactVectorIndex, HnswVectorIndex, packRows, type HnswSettings, type VectorIndex } from './vector.js';

/** What a build thread is started with: the configuration slices a build needs (plain data). */
export interface BuildWorkerData {
  lexical: LexicalSettings;
  hnsw: HnswSettings;
  /** One Int32; set to 1 to make the threads abandon their build at the next checkpoint. */
  cancel: SharedArrayBuffer;
  /** Set for the thread that embeds the texts it counts (see Embedder.threadable). */
  embedder?: ThreadableEmbedder;
}

/**
 * A build comes as a stream of messages with the same id, so the threads work while this thread embeds: the texts in
 * parts (counted into BM25 as they come), the vectors a chunk at a time in catalog order (the graph grows as they come),
 * then `finish`, naming the parts the thread answers with (see BuiltParts). `drop` abandons a build whose embedding
 * failed.
 */
export type BuildRequest = BuildTexts | BuildVectors | BuildFinish | BuildConnect | BuildReuse | { kind: 'drop'; id: number };

/** To the graph's thread: start from the previous build's graph in `file`; `changed` rows will be replaced. */
export interface BuildReuse {
  kind: 'reuse';
  id: number;
  file: string;
  total: number;
  dimensions: number;
  changed: number;
}

/** One end of the channel the vectors take from the thread that embeds to the graph's (when embedding is in a thread). */
export interface BuildConnect {
  kind: 'connect';
  id: number;
  vectors: 'send' | 'receive';
  port: MessagePort;
}

export interface BuildTexts {
  kind: 'texts';
  id: number;
  /** Catalog position of the part's first entry, and the catalog's size. */
  start: number;
  total: number;
  /** When the previous graph is reused: the catalog positions of this part whose text changed (only they are embedded). */
  embed?: number[];
  /** Per catalog entry of this part, in catalog order: its name and its searchable text. */
  names: string[];
  texts: SearchableText[];
}

/**
 * Entries per `texts` message: posting a message clones it synchronously, and 100,000 tools' texts in one took over
 * 100 ms of this thread (every request waited); a part of this size takes about a millisecond. Small for the thread's
 * memory too: a part it is counting lives across its scavenges and is promoted before it dies (parts of 5,000 left
 * ~250 MB of the thread's heap garbage by the end of a 100k-tool build).
 */
const TEXTS_PART = 1_000;

export interface BuildVectors {
  kind: 'vectors';
  id: number;
  /** Catalog size: the rows the vector index will hold. */
  total: number;
  /** Catalog position of the first row. */
  start: number;
  /** rows × dimensions float32 values, row-major (transferred). */
  vectors: ArrayBuffer;
  dimensions: number;
  /** Uint32 catalog positions, one per row, when the rows replace those of a reused graph (else rows from `start`). */
  labels?: ArrayBuffer;
}

export interface BuildFinish {
  kind: 'finish';
  id: number;
  /** What this thread answers with. */
  parts: ('lexical' | 'vectors')[];
  /** Catalog size. */
  total: number;
  /** Of the vectors sent (the embedder's, when the catalog is empty). */
  dimensions: number;
}

/**
 * A built index handed to this thread in parts rather than as one artifact: the BM25 section (transferred), and the
 * vectors as a matrix (transferred) or as the graph file hnswlib wrote (hnswlib-node reads and writes graphs only as
 * files). An artifact would cost two more copies of the graph on the way (the thread reading the file back into one
 * buffer, this thread writing it out again to load it) and twice its size in memory while they exist.
 */
export interface BuiltParts {
  id: number;
  /** Texts the thread embedded (when it embeds). */
  embedded?: number;
  lexical?: LexicalParts;
  vectors?: { kind: 'exact'; matrix: ArrayBuffer; dimensions: number } | { kind: 'hnsw'; dir: string; file: string; dimensions: number };
}

export type BuildReply = BuiltParts | { id: number; error: string };

/** Sent after each `texts` part: how many texts of the build the thread has taken in (also after an error). */
export interface BuildCounted {
  id: number;
  counted: number;
}

/**
 * Catalogs larger than this are built in two threads, BM25 in one and the graph in the other (each part's CPU is then
 * on its own core: at 100k tools the graph alone takes ~11 s and BM25 ~4 s, which one thread did one after the other);
 * smaller ones in one thread, which costs one thread start instead of two.
 */
export const TWO_THREADS_ABOVE = 10_000;

/**
 * The in-process pipeline's builder (no Redis configured). Embedding, BM25 and the HNSW graph for 100k tools take tens
 * of seconds of synchronous CPU, which on the API's thread would stall every request for as long; they run in worker
 * threads. Past TWO_THREADS_ABOVE tools there are two: BM25's, which also embeds when the embedder can be made again
 * there (`Embedder.threadable`, the offline model), and the graph's, which takes the vectors as they come. Otherwise,
 * and for any other embedder, this thread embeds (the model lives here for queries), a batch at a time with the event
 * loop free in between, in chunks whose vectors go to the graph's thread at once. Threads are started per build and
 * each ended as soon as it has answered: what it held while building (the BM25 build's arrays, the graph, a model) is
 * then returned with its heap, instead of staying resident in an idle thread (over 100 MB after a 100k-tool build);
 * starting one costs less than a second, overlapped with the first texts. If a thread dies, the build in flight fails.
 */
export class WorkerIndexBuilder implements IndexBuilder {
  private nextId = 0;
  private closed = false;
  private readonly cancel = new SharedArrayBuffer(4);
  /** Threads of builds in flight. */
  private readonly threads = new Set<BuildThread>();
  /** The last index built, with the tools and text hashes it was built from: a small change reuses its graph. */
  private last: { names: readonly string[]; hashes: string[]; index: SearchIndex } | undefined;

  constructor(
    private readonly options: Pick<BuildWorkerData, 'lexical' | 'hnsw'> & {
      embedder: Embedder;
      cache?: EmbeddingCache;
      onBuilt?: (stats: BuildStats, index: SearchIndex) => void;
      /** Catalog size above which BM25 and the graph get a thread each (default TWO_THREADS_ABOVE). */
      twoThreadsAbove?: number;
      /** false: embed on this thread even when the embedder could run in BM25's (tests compare the two). */
      embedInThread?: boolean;
      /** false: build every graph afresh, even when a few tools changed in place (tests compare the two). */
      reuseGraph?: boolean;
    },
  ) {}

  async build(snapshot: CatalogSnapshot): Promise<SearchIndex> {
    if (this.closed) throw new Error('the index builder is closed');
    const started = performance.now();
    const { entries } = snapshot;
    const total = entries.length;
    const { embedder, cache } = this.options;
    const id = this.nextId++;
    // A build starts from a catalog change, in the same turn of the event loop as the change itself (at 100k tools the
    // catalog's own step is tens of ms): each thread start gets a turn of its own.
    await yieldTurn();
    const split = total > (this.options.twoThreadsAbove ?? TWO_THREADS_ABOVE);
    // A plain-JavaScript embedder (the offline model) is made again in BM25's thread and embeds there, beside the graph:
    // this thread then only hands the texts on. Embedding here made ~250 MB of garbage on the request thread's heap at
    // 100k tools (and the long collections that go with it). Any other embedder (onnxruntime, a remote API) stays here.
    const embedInThread = split && embedder.threadable !== undefined && this.options.embedInThread !== false;
    // Started now, the threads boot (hundreds of ms of module loading) while this thread embeds the first chunk.
    const textThread = this.start(embedInThread ? embedder.threadable : undefined);
    await yieldTurn();
    const graphThread = split ? this.start() : textThread;
    const threads = [...new Set([textThread, graphThread])];
    let previousGraphDir: string | undefined;
    try {
      // A remote embedder may learn its dimensions from its first answer; the first chunk settles them for the build.
      let dimensions: number | undefined;
      const names = entries.map((entry) => entry.tool.name);
      let abandoned = false;
      if (embedInThread) {
        // The vectors go from BM25's thread to the graph's directly.
        const { port1, port2 } = new MessageChannel();
        textThread.send({ kind: 'connect', id, vectors: 'send', port: port1 }, [port1]);
        graphThread.send({ kind: 'connect', id, vectors: 'receive', port: port2 }, [port2]);
      }
      // A few tools changed in place: the previous graph is read back and only their rows are embedded and replaced.
      const changed = split ? this.changedInPlace(entries, names) : undefined;
      if (changed) {
        const graph = (this.last!.index.vectors as HnswVectorIndex).index;
        dimensions = graph.getNumDimensions();
        previousGraphDir = await mkdtemp(path.join(tmpdir(), 'toolrouter-index-'));
        const file = path.join(previousGraphDir, 'previous.bin');
        // On libuv's pool; the live index keeps answering searches from the same graph meanwhile (both only read it).
        await graph.writeIndex(file);
        graphThread.send({ kind: 'reuse', id, file, total, dimensions, changed: changed.length });
      }
      // The texts go to their thread while this thread embeds, at most two parts ahead of what it has counted: parts
      // queued beyond that would be copies of texts this thread holds anyway (at 100k tools, ~100 MB waiting in the
      // thread's queue while BM25 caught up).
      const feeding = (async () => {
        for (let start = 0; start < total && !abandoned; start += TEXTS_PART) {
          await textThread.whenCounted(id, Math.max(0, start - TEXTS_PART));
          const part = entries.slice(start, start + TEXTS_PART);
          const embed = changed?.filter((label) => label >= start && label < start + TEXTS_PART);
          if (!abandoned) textThread.send({ kind: 'texts', id, start, total, names: names.slice(start, start + TEXTS_PART), texts: part.map((entry) => entry.text), ...(embed ? { embed } : {}) });
        }
      })();
      // Read below, once embedding is done; a thread that dies meanwhile fails it.
      feeding.catch(() => undefined);
      let embedded = 0;
      if (!embedInThread) {
        try {
          if (changed) embedded = await this.embedChanged(changed, entries, id, graphThread, dimensions!);
          else embedded = await embedInChunks(
            total,
            (start, end) => entries.slice(start, end).map((entry) => embeddingText(entry.text)),
            embedder,
            (start, vectors) => {
              const width = (dimensions ??= vectors[0]?.length ?? embedder.dimensions);
              const rows = packRows(vectors, width);
              graphThread.send({ kind: 'vectors', id, total, start, vectors: rows.buffer as ArrayBuffer, dimensions: width }, [rows.buffer as ArrayBuffer]);
            },
            {
              ...(cache ? { cache } : {}),
              checkpoint: () => {
                if (this.closed) throw new Error('the index builder is closed');
              },
            },
          );
        } catch (error) {
          abandoned = true;
          for (const thread of threads) thread.send({ kind: 'drop', id });
          throw error;
        }
      }
      await feeding;
      dimensions ??= embedder.dimensions;
      const finish = (parts: BuildFinish['parts']): BuildFinish => ({ kind: 'finish', id, parts, total, dimensions: dimensions! });
      const parts: BuiltParts = { id };
      if (graphThread === textThread) {
        textThread.send(finish(['lexical', 'vectors']));
        Object.assign(parts, await this.answer(textThread, id));
      } else {
        // The graph's thread is told to finish once BM25's has answered (and ended, giving its memory back): when that
        // thread embeds, every vector is on its way to the graph's by then; a failure there ends the build.
        textThread.send(finish(['lexical']));
        const text = await this.answer(textThread, id);
        parts.lexical = text.lexical;
        if (embedInThread) embedded = text.embedded ?? 0;
        graphThread.send(finish(['vectors']));
        parts.vectors = (await this.answer(graphThread, id)).vectors;
      }
      return await this.finished(parts, snapshot, names, embedded, started);
    } finally {
      for (const thread of threads) this.end(thread);
      if (previousGraphDir) await rm(previousGraphDir, { recursive: true, force: true });
    }
  }

  /** A thread's answer to build `id`, the thread ended as soon as it came; its error as this build's. */
  private async answer(thread: BuildThread, id: number): Promise<BuiltParts> {
    const reply = await thread.reply(id).finally(() => this.end(thread));
    if ('error' in reply) throw new Error(reply.error);
    return reply;
  }

  /** Embeds the changed texts on this thread and sends their rows, labelled, to replace those of the reused graph. */
  private async embedChanged(changed: number[], entries: CatalogSnapshot['entries'], id: number, graphThread: BuildThread, dimensions: number): Promise<number> {
    const { embedder, cache } = this.options;
    const { vectors, embedded } = await embedWithCache(changed.map((label) => embeddingText(entries[label]!.text)), embedder, cache);
    const rows = packRows(vectors, dimensions);
    const labels = Uint32Array.from(changed).buffer;
    graphThread.send({ kind: 'vectors', id, total: entries.length, start: 0, vectors: rows.buffer as ArrayBuffer, dimensions, labels }, [rows.buffer as ArrayBuffer, labels]);
    return embedded;
  }

  /**
   * The positions whose text changed since the last build, when reusing its graph pays: the same tools in the same
   * order (so graph labels still mean the same tools), at least one and at most 1% of them changed. Otherwise undefined
   * and the graph is built afresh (a reused graph is not the one a fresh build makes; it finds the same neighbours).
   */
  private changedInPlace(entries: CatalogSnapshot['entries'], names: readonly string[]): number[] | undefined {
    const last = this.last;
    if (!last || last.index.vectors.kind !== 'hnsw' || last.names.length !== names.length || this.options.reuseGraph === false) return undefined;
    const changed: number[] = [];
    const most = Math.max(1, Math.floor(names.length / 100));
    for (let i = 0; i < names.length; i++) {
      if (names[i] !== last.names[i]) return undefined;
      if (entries[i]!.textHash !== last.hashes[i] && changed.push(i) > most) return undefined;
    }
    return changed.length > 0 ? changed : undefined;
  }

  private async finished(parts: BuiltParts, snapshot: CatalogSnapshot, names: string[], embedded: number, started: number): Promise<SearchIndex> {
    const builtAt = new Date().toISOString();
    const index = await this.load(parts, { catalogHash: snapshot.catalogHash, model: this.options.embedder.modelId, builtAt }, names);
    // What the next build compares with (the text hashes are the catalog entries' own strings).
    this.last = { names, hashes: snapshot.entries.map((entry) => entry.textHash), index };
    this.options.onBuilt?.({ tools: names.length, embedded, durationMs: performance.now() - started }, index);
    return index;
  }

  /**
   * Stops the threads; a build in flight is abandoned at its next checkpoint (within about a second), not waited out.
   * Each thread is asked first and terminated once it has stopped (or after `graceMs`), never inside hnswlib's code.
   */
  async close(graceMs = 10_000): Promise<void> {
    this.closed = true;
    Atomics.store(new Int32Array(this.cancel), 0, 1);
    // Bounded: polls every 20 ms for at most graceMs.
    const deadline = performance.now() + graceMs;
    while ([...this.threads].some((thread) => thread.busy) && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await Promise.all([...this.threads].map((thread) => this.end(thread)));
  }

  /** Whether a build thread is running now (started by a build, ended when it is done or by close). */
  get running(): boolean {
    return this.threads.size > 0;
  }

  /**
   * The only part of a build on this thread: reading the parts, with the event loop free between the BM25 section and
   * the graph (each a few hundred ms at 100k tools). The graph's temp directory goes whatever happens.
   */
  private async load(parts: BuiltParts, about: Pick<SearchIndex, 'catalogHash' | 'model' | 'builtAt'>, names: string[]): Promise<SearchIndex> {
    const { vectors } = parts;
    try {
      if (!parts.lexical || !vectors) throw new Error('the index build threads answered without the lexical index or the vectors');
      const lexical = LexicalIndex.fromParts(names, parts.lexical, this.options.lexical);
      await yieldTurn();
      const { hnsw } = this.options;
      let vectorIndex: VectorIndex;
      if (vectors.kind === 'exact') {
        vectorIndex = new ExactVectorIndex(names, { matrix: new Float32Array(vectors.matrix), dimensions: vectors.dimensions });
      } else {
        vectorIndex = await HnswVectorIndex.load(names, vectors.file, vectors.dimensions, hnsw.efSearch, hnsw.exactThreshold);
      }
      return { ...about, size: names.length, lexical, vectors: vectorIndex };
    } finally {
      if (vectors?.kind === 'hnsw') await rm(vectors.dir, { recursive: true, force: true });
    }
  }

  /** A build thread; with `embedder`, one that embeds the texts it is sent (it starts loading the model at once). */
  private start(embedder?: ThreadableEmbedder): BuildThread {
    const { lexical, hnsw } = this.options;
    const thread = new BuildThread(startThread(workerFile(), { lexical, hnsw, cancel: this.cancel, ...(embedder ? { embedder } : {}) }));
    this.threads.add(thread);
    return thread;
  }

  private end(thread: BuildThread): Promise<void> {
    this.threads.delete(thread);
    return thread.end();
  }
}

/**
 * One build thread: messages to it, its replies by build id, and its end. If it dies, the builds waiting on it fail.
 */
class BuildThread {
  private readonly waiting = new Map<number, { resolve: (reply: BuildReply) => void; reject: (error: Error) => void }>();
  /** Texts the thread has taken in, per build, and who waits for that to reach a count. */
  private readonly counted = new Map<number, number>();
  private readonly countWaiters = new Set<{ id: number; atLeast: number; resolve: () => void; reject: (error: Error) => void }>();
  private readonly replies = new Map<number, BuildReply>();
  private failure: Error | undefined;
  private ended: Promise<void> | undefined;

  constructor(private readonly worker: Worker) {
    // A build thread alone must not keep the process running.
    worker.unref();
    worker.on('message', (reply: BuildReply | BuildCounted) => {
      if ('counted' in reply) {
        this.counted.set(reply.id, reply.counted);
        for (const waiter of this.countWaiters) {
          if (waiter.id !== reply.id || waiter.atLeast > reply.counted) continue;
          this.countWaiters.delete(waiter);
          waiter.resolve();
        }
        return;
      }
      this.counted.delete(reply.id);
      const pending = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      if (pending) pending.resolve(reply);
      else this.replies.set(reply.id, reply);
    });
    const fail = (error: Error) => {
      this.failure ??= error;
      for (const pending of this.waiting.values()) pending.reject(error);
      this.waiting.clear();
      for (const waiter of this.countWaiters) waiter.reject(error);
      this.countWaiters.clear();
    };
    worker.on('error', (error: unknown) => fail(new Error(`index build thread failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error })));
    worker.on('exit', (code) => fail(new Error(`index build thread exited (code ${code})`)));
  }

  /** Whether a build waits on this thread's reply. */
  get busy(): boolean {
    return this.waiting.size > 0;
  }

  send(message: BuildRequest, transfer: Transferable[] = []): void {
    if (this.ended === undefined) this.worker.postMessage(message, transfer);
  }

  /** Resolves once the thread has taken in `atLeast` texts of build `id` (a thread that died fails it). */
  whenCounted(id: number, atLeast: number): Promise<void> {
    if ((this.counted.get(id) ?? 0) >= atLeast) return Promise.resolve();
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.countWaiters.add({ id, atLeast, resolve, reject }));
  }

  /** The thread's answer to build `id` (a thread that died, or was ended, fails it). */
  reply(id: number): Promise<BuildReply> {
    const ready = this.replies.get(id);
    if (ready) {
      this.replies.delete(id);
      return Promise.resolve(ready);
    }
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiting.set(id, { resolve, reject }));
  }

  end(): Promise<void> {
    this.ended ??= this.worker.terminate().then(() => undefined);
    return this.ended;
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

function yieldTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * A build thread's young generation: 48 MB, what `--max-semi-space-size=16` (npm start, the image) gives the API
 * thread. Node 24's default lets it grow to 128 MB, and a thread allocating as fast as BM25's build promotes more of
 * its garbage besides: at 100k tools the BM25 thread's heap reached 260 MB by default, ~130 MB with this.
 */
const BUILD_THREAD_LIMITS = { maxYoungGenerationSizeMb: 48 };

/**
 * Compiled JavaScript loads directly. TypeScript needs tsx in the thread too: a Worker inherits `--import tsx` in its
 * execArgv, but on Node 20 the loader hooks that flag registers do not reach worker threads, so the thread registers
 * tsx's loader itself before importing the module (tsx is resolved here, where it is known to be loaded).
 */
function startThread(file: URL, workerData: BuildWorkerData): Worker {
  if (!file.pathname.endsWith('.ts')) return new Worker(file, { workerData, resourceLimits: BUILD_THREAD_LIMITS });
  const tsx = import.meta.resolve('tsx/esm/api');
  const bootstrap = `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(file.href)}); });`;
  return new Worker(bootstrap, { eval: true, workerData, resourceLimits: BUILD_THREAD_LIMITS });
}
