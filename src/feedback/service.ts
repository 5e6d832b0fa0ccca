import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Embedder } from '../embedding/embedder.js';
import type { ScoredName } from '../indexing/lexical.js';
import type { Metrics } from '../metrics.js';
import type { RedisBus } from '../redis/bus.js';
import type { FeedbackSignal } from '../search/search.js';
import { hashedQuery, isHashedQuery } from '../analytics/types.js';
import { FeedbackNeighbours } from './neighbours.js';
import { MemoryFeedbackStore, RedisFeedbackStore, type FeedbackStore } from './store.js';
import type { FeedbackEvent, FeedbackSettings, FeedbackSurface } from './types.js';

export interface FeedbackInput {
  query: string;
  tool: string;
  relevant: boolean;
  /** Who it came from (an API key id); '' or undefined when unknown. */
  scope?: string;
  surface: FeedbackSurface;
}

/** Records the tool an agent wanted for a query; all of them (REST, MCP sessions, chat proxy) go through record(). */
export interface FeedbackRecorder {
  record(input: FeedbackInput): Promise<FeedbackEvent>;
  /**
   * What a face may keep of a query while it waits for the call that credits it (a search id's record, a chat turn):
   * the query itself, or under `analytics.queries: hash | off` its `sha256:` form, so no query text is stored. A
   * credit then carries that form: the search log pairs it all the same; nothing can be learnt from it.
   * Absent: the query itself.
   */
  storedQuery?(query: string): string;
}

/**
 * Learning from usage: records events in the store and keeps their query embeddings in memory, where every search
 * looks up the nearest recorded queries (the feedback signal of hybrid search, src/search/fusion.ts).
 */
export class FeedbackService implements FeedbackRecorder, FeedbackSignal {
  private readonly neighbours: FeedbackNeighbours;

  constructor(
    private readonly embedder: Embedder,
    private readonly store: FeedbackStore,
    readonly settings: FeedbackSettings,
    private readonly log?: Logger,
    private readonly now: () => number = Date.now,
    /** The router's metrics (events recorded and held); without it nothing is counted. */
    private readonly metrics?: Pick<Metrics, 'feedbackEventsRecorded' | 'feedbackEventsHeld'>,
    /**
     * False under `analytics.queries: hash | off`: events keep the query's `sha256:` form, never its text (the
     * embedding is still of the text). Such events cannot be embedded again, so a model change drops them.
     */
    private readonly keepQueries = true,
  ) {
    this.neighbours = new FeedbackNeighbours(embedder.dimensions, settings, now);
  }

  get weight(): number {
    return this.settings.weight;
  }

  /** Events held in memory (within the retention limits). */
  get size(): number {
    return this.neighbours.size;
  }

  /**
   * Loads the stored events. Those embedded by another model (the embedding model changed since) are embedded again
   * from their query text, so a model change keeps what was learned.
   */
  async start(): Promise<void> {
    let events = await this.store.start((event) => this.hold(event));
    const isStale = (event: FeedbackEvent) => event.model !== this.embedder.modelId || event.embedding.length !== this.embedder.dimensions;
    // A hashed query (hash mode) has no text to embed again: under another model its event is dropped.
    const lost = events.filter((event) => isStale(event) && isHashedQuery(event.query));
    if (lost.length > 0) {
      events = events.filter((event) => !lost.includes(event));
      this.log?.info({ events: lost.length }, 'feedback events with hashed queries dropped: they cannot be embedded by the current model');
    }
    const stale = events.filter(isStale);
    if (stale.length > 0) {
      const vectors = await this.embedder.embed(stale.map((event) => event.query), { role: 'query' });
      stale.forEach((event, i) => {
        event.embedding = vectors[i]!;
        event.model = this.embedder.modelId;
      });
      this.log?.info({ events: stale.length, model: this.embedder.modelId }, 'feedback queries re-embedded for the current model');
    }
    for (const event of events) this.neighbours.add(event);
    this.neighbours.compact();
    this.metrics?.feedbackEventsHeld.set(this.neighbours.size);
    if (events.length > 0) this.log?.info({ events: this.neighbours.size }, 'feedback events loaded');
  }

  /** Stored first: when the store is unavailable the caller gets the error and nothing is half-recorded. */
  async record(input: FeedbackInput): Promise<FeedbackEvent> {
    const query = input.query.trim();
    // A credit that carries only a query's hash (storedQuery) has no words to learn from: nothing is stored.
    if (isHashedQuery(query)) return { id: '', query, embedding: new Float32Array(0), model: '', tool: input.tool, relevant: input.relevant, time: this.now(), scope: input.scope ?? '' };
    const [embedding] = await this.embedder.embed([query], { role: 'query' });
    const event: FeedbackEvent = {
      id: randomUUID(),
      query: this.keepQueries ? query : hashedQuery(query),
      embedding: embedding!,
      model: this.embedder.modelId,
      tool: input.tool,
      relevant: input.relevant,
      time: this.now(),
      scope: input.scope ?? '',
    };
    await this.store.append(event);
    this.hold(event);
    this.metrics?.feedbackEventsRecorded.inc({ surface: input.surface, relevant: String(input.relevant) });
    return event;
  }

  storedQuery(query: string): string {
    return this.keepQueries ? query : hashedQuery(query);
  }

  /** The feedback signal for a query embedding; `scope` only counts under `isolation: key`. */
  boosts(query: Float32Array, scope?: string): ScoredName[] {
    return this.neighbours.boosts(query, this.settings.isolation === 'key' ? (scope ?? '') : undefined);
  }

  close(): Promise<void> {
    return this.store.close();
  }

  private hold(event: FeedbackEvent): void {
    if (event.model !== this.embedder.modelId) return;
    this.neighbours.add(event);
    this.metrics?.feedbackEventsHeld.set(this.neighbours.size);
  }
}

/** What `startFeedback` takes: the `feedback` slice and the router's metrics, handed in by the assembly (events go to the bus when there is one). */
export interface FeedbackStartOptions {
  settings: FeedbackSettings;
  metrics?: Metrics;
  /** False under `analytics.queries: hash | off`: events keep only the query's hash (FeedbackService). */
  keepQueries?: boolean;
}

/**
 * The feedback service of a process: events in Redis when the process has a Redis bus (shared by every instance, kept
 * across restarts), in memory otherwise. Undefined when `feedback.enabled` is false.
 */
export async function startFeedback(
  options: FeedbackStartOptions,
  embedder: Embedder,
  log: Logger,
  bus?: RedisBus,
  now?: () => number,
): Promise<FeedbackService | undefined> {
  const { settings } = options;
  if (!settings.enabled) return undefined;
  const retention = { maxEvents: settings.maxEvents, maxAgeDays: settings.maxAgeDays };
  let store: FeedbackStore;
  if (bus) {
    store = new RedisFeedbackStore(bus, retention, log, now);
  } else {
    store = new MemoryFeedbackStore(retention, now);
  }
  const service = new FeedbackService(embedder, store, settings, log.child({ component: 'feedback' }), now, options.metrics, options.keepQueries ?? true);
  try {
    await service.start();
  } catch (error) {
    await store.close();
    throw new Error(`could not load feedback events: ${(error as Error).message}`, { cause: error });
  }
  return service;
}
