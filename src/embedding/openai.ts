/**
 * The `openai` embeddings provider: any server speaking OpenAI's `POST /v1/embeddings` (OpenAI, Azure OpenAI's
 * v1 endpoint, Ollama, Hugging Face TEI, vLLM, LiteLLM). Batches go out `concurrency` at a time; 429, 5xx, network
 * errors and per-request timeouts are retried with exponential backoff, honouring `Retry-After`.
 *
 * A search waits for its query's embedding, so queries fail fast instead: a refused or reset connection is not
 * retried, and after `failuresBeforeCooldown` failed requests in a row the provider is not asked for queries for
 * `cooldownMs` (searches answer from BM25 at once), then one query tries it again. Builds keep their retries.
 */
import type { EmbedOptions, Embedder } from './types.js';
import { modelSettings, type ModelSettings } from './presets.js';

export interface OpenAiEmbedderOptions extends Partial<ModelSettings> {
  /** Up to and including the version segment, e.g. `https://api.openai.com/v1`, `http://localhost:11434/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer`; from EMBEDDING_API_KEY. Local servers usually need none. */
  apiKey?: string;
  model: string;
  /** Asked of models that can shorten their output (text-embedding-3-*); every vector returned must have it. */
  dimensions?: number;
  batchSize: number;
  /** Batches in flight at once. @defaultValue 4 */
  concurrency?: number;
  /** Retries of one batch after the first attempt. @defaultValue 4 */
  retries?: number;
  /** Per HTTP request. @defaultValue 30000 */
  timeoutMs?: number;
  /**
   * First backoff; doubled per retry (with jitter), capped at maxBackoffMs, unless the server says Retry-After.
   * @defaultValue 500
   */
  backoffMs?: number;
  /** @defaultValue 30000 */
  maxBackoffMs?: number;
  /** Failed requests in a row (connection, timeout, 429, 5xx) after which queries stop asking the provider. @defaultValue 3 */
  failuresBeforeCooldown?: number;
  /** How long queries do not ask the provider after that; then one query tries it again. @defaultValue 10000 */
  cooldownMs?: number;
}

/** The defaults of the optional settings above (the @defaultValue tags repeat them for readers of the interface). */
export const OPENAI_DEFAULTS = { concurrency: 4, retries: 4, timeoutMs: 30_000, backoffMs: 500, maxBackoffMs: 30_000, failuresBeforeCooldown: 3, cooldownMs: 10_000 };

/** A failure worth retrying (rate limit, server error, timeout, connection) and how long the server asked us to wait. */
class RetryableError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
    /** The connection itself failed (refused, reset, no route): known at once, and a query does not wait for a retry. */
    readonly connection = false,
  ) {
    super(message);
  }
}

/** What the provider's cooldown reports to metrics (src/metrics.ts). */
export type ProviderEvent = 'failure' | 'cooldown' | 'skipped' | 'recovered';

/** Node's codes (on undici's `cause`) for a connection that failed as such, not for a slow or bad answer. */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET']);

function isConnectionFailure(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
    // AggregateError (happy eyeballs: one failure per address tried).
    if (cause instanceof AggregateError && cause.errors.some((inner) => isConnectionFailure(inner))) return true;
  }
  return false;
}

/**
 * Failures in a row, and the time until which queries do not ask the provider: the Redis gate's cooldown
 * (src/redis/connection.ts) for the embeddings provider, so an outage costs a few failed requests, not one per search.
 */
export class ProviderCooldown {
  private failures = 0;
  private until = 0;
  private probing = false;
  private lastError = '';
  private readonly listeners: ((event: ProviderEvent) => void)[] = [];

  constructor(private readonly limits: { failuresBeforeCooldown: number; cooldownMs: number }) {}

  /** Receives every failure, cooldown started, query skipped and recovery. */
  observe(listener: (event: ProviderEvent) => void): void {
    this.listeners.push(listener);
  }

  get coolingDown(): boolean {
    return this.failures >= this.limits.failuresBeforeCooldown && (Date.now() < this.until || this.probing);
  }

  /**
   * Before a query asks the provider: throws while cooling down. Once the cooldown is over one query goes through
   * (the probe); the others are still answered without asking until it has succeeded or failed.
   */
  admit(): () => void {
    if (this.failures >= this.limits.failuresBeforeCooldown) {
      if (Date.now() < this.until || this.probing) {
        this.emit('skipped');
        const seconds = Math.max(0, (this.until - Date.now()) / 1000).toFixed(1);
        throw new Error(`the embeddings provider is not asked for ${seconds} s more after ${this.failures} failures in a row (last: ${this.lastError})`);
      }
      this.probing = true;
      return () => (this.probing = false);
    }
    return () => {};
  }

  failed(error: Error): void {
    this.failures++;
    this.lastError = error.message;
    this.emit('failure');
    if (this.failures >= this.limits.failuresBeforeCooldown) {
      this.until = Date.now() + this.limits.cooldownMs;
      this.emit('cooldown');
    }
  }

  succeeded(): void {
    if (this.failures >= this.limits.failuresBeforeCooldown) this.emit('recovered');
    this.failures = 0;
    this.until = 0;
  }

  private emit(event: ProviderEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}

/** The cooldown of an embedder built here, for metrics; undefined for other embedders. */
export function providerCooldownOf(embedder: Embedder): ProviderCooldown | undefined {
  return embedder instanceof OpenAiEmbedder ? embedder.cooldown : undefined;
}

export async function createOpenAiEmbedder(options: OpenAiEmbedderOptions): Promise<Embedder> {
  const embedder = new OpenAiEmbedder(options);
  // The dimension comes from the server when it is not configured. A server down at start is not fatal: the first
  // successful call settles it, and until then builds retry and searches answer from BM25.
  if (options.dimensions === undefined) await embedder.embed(['dimension probe']).catch(() => undefined);
  return embedder;
}

class OpenAiEmbedder implements Embedder {
  readonly modelId: string;
  readonly cacheKey: string;
  dimensions: number;
  private readonly settings: ModelSettings;
  private readonly endpoint: string;
  private readonly limits: typeof OPENAI_DEFAULTS;
  readonly cooldown: ProviderCooldown;

  constructor(private readonly options: OpenAiEmbedderOptions) {
    this.settings = modelSettings(options.model, options);
    this.endpoint = `${options.baseUrl.replace(/\/+$/, '')}/embeddings`;
    this.dimensions = options.dimensions ?? 0;
    this.modelId = `openai:${options.model}${options.dimensions ? `@${options.dimensions}` : ''}`;
    this.cacheKey = `${this.modelId}:${this.settings.documentPrefix}`;
    const defined = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
    this.limits = { ...OPENAI_DEFAULTS, ...(defined as Partial<typeof OPENAI_DEFAULTS>) };
    this.cooldown = new ProviderCooldown(this.limits);
  }

  async embed(texts: string[], options: EmbedOptions = {}): Promise<Float32Array[]> {
    const prefix = options.role === 'query' ? this.settings.queryPrefix : this.settings.documentPrefix;
    const out: Float32Array[] = new Array(texts.length);
    const todo: number[] = [];
    texts.forEach((text, i) => {
      if (typeof text !== 'string') throw new TypeError(`embed() expects strings; item ${i} is ${typeof text}`);
      // The API rejects empty input; an empty text has nothing to match anyway (see Embedder.embed).
      if (text.trim() === '') out[i] = new Float32Array(this.dimensions);
      else todo.push(i);
    });
    const batches: number[][] = [];
    for (let start = 0; start < todo.length; start += this.options.batchSize) batches.push(todo.slice(start, start + this.options.batchSize));
    let next = 0;
    const worker = async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        const vectors = await this.withRetries(batch.map((i) => prefix + texts[i]!), options.signal, options.role === 'query');
        batch.forEach((i, row) => (out[i] = vectors[row]!));
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.limits.concurrency, batches.length) }, worker));
    // Texts embedded as zero before the dimension was known get the right length now.
    for (let i = 0; i < out.length; i++) if (out[i]!.length !== this.dimensions) out[i] = new Float32Array(this.dimensions);
    return out;
  }

  private async withRetries(input: string[], signal: AbortSignal | undefined, query: boolean): Promise<Float32Array[]> {
    for (let attempt = 0; ; attempt++) {
      // Builds wait out an outage with their backoff; a query, which a search is waiting for, is not sent at all.
      const done = query ? this.cooldown.admit() : () => {};
      try {
        const vectors = await this.request(input, signal);
        this.cooldown.succeeded();
        return vectors;
      } catch (error) {
        // A query abandoned at the search's embed timeout is the provider not answering in time: a failure too.
        if (error instanceof RetryableError || (query && signal?.aborted)) this.cooldown.failed(error as Error);
        if (!(error instanceof RetryableError) || attempt >= this.limits.retries || signal?.aborted) throw error;
        if (query && error.connection) throw error;
        const backoff = Math.min(this.limits.maxBackoffMs, this.limits.backoffMs * 2 ** attempt) * (0.5 + Math.random() / 2);
        await sleep(Math.min(this.limits.maxBackoffMs, error.retryAfterMs ?? backoff), signal);
      } finally {
        done();
      }
    }
  }

  private async request(input: string[], signal: AbortSignal | undefined): Promise<Float32Array[]> {
    const timeout = AbortSignal.timeout(this.limits.timeoutMs);
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    const body = { model: this.options.model, input, encoding_format: 'float', ...(this.options.dimensions ? { dimensions: this.options.dimensions } : {}) };
    let response: Response;
    try {
      response = await fetch(this.endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      const connection = !timeout.aborted && isConnectionFailure(error);
      const cause = (error as Error).cause instanceof Error ? `: ${((error as Error).cause as Error).message}` : '';
      const reason = timeout.aborted ? `no answer within ${this.limits.timeoutMs} ms` : `${(error as Error).message}${cause}`;
      throw new RetryableError(`embeddings request to ${this.endpoint} failed: ${reason}`, undefined, connection);
    }
    if (!response.ok) {
      const detail = (await response.text().catch(() => '')).slice(0, 300);
      const message = `embeddings server answered ${response.status} ${response.statusText}${detail ? `: ${detail}` : ''}`;
      if (response.status === 429 || response.status >= 500) throw new RetryableError(message, retryAfterMs(response.headers.get('retry-after')));
      throw new Error(message);
    }
    return this.vectors(await response.json(), input.length);
  }

  /** The response's vectors in input order, L2-normalised, after checking count and dimension. */
  private vectors(payload: unknown, expected: number): Float32Array[] {
    const data = (payload as { data?: unknown } | null)?.data;
    if (!Array.isArray(data) || data.length !== expected) {
      throw new Error(`embeddings server returned ${Array.isArray(data) ? data.length : 'no'} vectors for ${expected} inputs`);
    }
    const out: Float32Array[] = new Array(expected);
    data.forEach((item: { embedding?: unknown; index?: unknown }, position) => {
      const index = typeof item?.index === 'number' ? item.index : position;
      const values = item?.embedding;
      if (!Array.isArray(values) || values.length === 0 || !values.every((v) => typeof v === 'number' && Number.isFinite(v))) {
        throw new Error(`embeddings server returned a malformed vector at index ${index}`);
      }
      if (this.dimensions === 0) this.dimensions = values.length;
      if (values.length !== this.dimensions) {
        throw new Error(`embeddings server returned ${values.length} dimensions, expected ${this.dimensions} (model ${this.options.model})`);
      }
      if (!Number.isInteger(index) || index < 0 || index >= expected || out[index]) throw new Error(`embeddings server returned a bad index ${index}`);
      out[index] = unit(values as number[]);
    });
    return out;
  }
}

function unit(values: number[]): Float32Array {
  let sq = 0;
  for (const v of values) sq += v * v;
  const n = Math.sqrt(sq);
  const out = new Float32Array(values.length);
  if (n > 0) for (let d = 0; d < values.length; d++) out[d] = values[d]! / n;
  return out;
}

/** Retry-After as seconds or an HTTP date; undefined when absent or unreadable. */
function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', abort);
      resolve();
    }
    function abort() {
      clearTimeout(timer);
      reject(signal!.reason);
    }
    signal?.addEventListener('abort', abort, { once: true });
  });
}
