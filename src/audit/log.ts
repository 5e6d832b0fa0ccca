/**
 * The audit trail as the call path sees it (AuditSink): `record` turns an attempt into a record body and queues it;
 * a background loop appends the queue to the store in batches, so writing never delays a call. A full queue drops
 * and counts; a failing store is retried every second, and with `required` calls fail closed meanwhile.
 */
import { createHash } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { canonicalJson, type AuditBody } from './chain.js';
import type { AuditSettings } from './settings.js';
import type { AuditPage, AuditQuery, AuditStore } from './store.js';
import type { AuditEvent, AuditSink } from './types.js';

/** Counters the log bumps (src/metrics.ts). */
export interface AuditMetrics {
  written(records: number, result: 'ok' | 'error'): void;
  dropped(): void;
}

export interface AuditLogOptions {
  store: AuditStore;
  /** This instance's id (the instance registry's), on every record it writes. */
  instance: string;
  settings: Pick<AuditSettings, 'arguments' | 'queueSize' | 'required'>;
  metrics?: AuditMetrics;
  log?: Logger;
  /**
   * How long a failed append waits before it is tried again.
   * @defaultValue 1000
   */
  retryMs?: number;
}

/** Records appended per store round trip. */
const BATCH = 100;

export class AuditLog implements AuditSink {
  private queue: AuditBody[] = [];
  private draining: Promise<void> | undefined;
  private failing = false;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: AuditLogOptions) {}

  record(event: AuditEvent): void {
    if (this.queue.length >= this.options.settings.queueSize) {
      this.options.metrics?.dropped();
      return;
    }
    const { arguments: args, ...rest } = event;
    const traceId = event.trace ?? trace.getActiveSpan()?.spanContext().traceId;
    const body: AuditBody = { ...rest, instance: this.options.instance, ...(traceId ? { trace: traceId } : {}), ...this.argumentsOf(args) };
    this.queue.push(body);
    this.schedule();
  }

  accepting(): boolean {
    return !this.options.settings.required || !this.failing;
  }

  /** What a record keeps of the arguments (`audit.arguments`); they arrive with credentials already redacted. */
  private argumentsOf(args: unknown): { arguments?: unknown } {
    if (args === undefined) return {};
    switch (this.options.settings.arguments) {
      case 'full':
        return { arguments: args };
      case 'hash':
        return { arguments: `sha256:${createHash('sha256').update(canonicalJson(args)).digest('hex')}` };
      case 'off':
        return {};
    }
  }

  private schedule(): void {
    if (this.draining || this.retry || this.closed) return;
    this.draining = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.drain()).finally(() => (this.draining = undefined));
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, BATCH);
      try {
        await this.options.store.append(batch);
      } catch (error) {
        if (!this.failing) this.options.log?.warn({ err: error, queued: this.queue.length }, 'audit store cannot take records; retrying');
        this.failing = true;
        this.options.metrics?.written(batch.length, 'error');
        if (!this.closed) {
          this.retry = setTimeout(() => {
            this.retry = undefined;
            this.schedule();
          }, this.options.retryMs ?? 1000);
          this.retry.unref();
        }
        return;
      }
      this.queue.splice(0, batch.length);
      if (this.failing) this.options.log?.info('audit store takes records again');
      this.failing = false;
      this.options.metrics?.written(batch.length, 'ok');
    }
  }

  /** Records waiting to be written. */
  get pending(): number {
    return this.queue.length;
  }

  /** Waits until the queue is written (or `timeoutMs` passes): shutdown, tests. Resolves to whether it emptied. */
  async flush(timeoutMs = 5000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length > 0 && Date.now() < deadline) {
      if (this.retry) {
        clearTimeout(this.retry);
        this.retry = undefined;
      }
      this.schedule();
      await Promise.race([this.draining, new Promise((resolve) => setTimeout(resolve, 100))]);
      if (this.failing) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return this.queue.length === 0;
  }

  read(query: AuditQuery): Promise<AuditPage> {
    return this.options.store.read(query);
  }

  async close(): Promise<void> {
    await this.flush(2000);
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    await this.options.store.close();
  }
}
