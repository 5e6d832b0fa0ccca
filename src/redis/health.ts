import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisClient, RedisKeys } from './connection.js';

/** One verdict of the probe: what `/ready` shows as `checks.redis`. */
export interface RedisCheck {
  ok: boolean;
  detail?: string;
  /**
   * Set on a failure that is Redis's own, the same for every instance: it answers but refuses writes (out of memory,
   * read-only, loading), or it stalls (a CLIENT PAUSE, a long command) while this instance's connection is up. Reads go
   * on and writes answer 503 with Retry-After; /ready stays 200, since taking this instance out would take every
   * instance out and leave the balancer nothing. Unset: this instance cannot reach Redis (its connection is down).
   */
  shared?: boolean;
}

/** Replies by which Redis refuses a write for reasons of its own (ioredis ReplyError messages start with the code). */
const REFUSALS: [RegExp, string][] = [
  [/^OOM\b/, 'Redis refuses writes: it is out of memory (maxmemory reached)'],
  [/^READONLY\b/, 'Redis refuses writes: it is a read-only replica'],
  [/^(LOADING|BUSY|MASTERDOWN|MISCONF)\b/, 'Redis refuses writes for now (loading, busy or misconfigured persistence)'],
];

export interface RedisHealthOptions {
  /** How long the probe's keyed write and read may take together before Redis counts as away (redis.commandTimeoutMs). */
  timeoutMs: number;
  /** How often the probe runs in the background once started (redis.healthCheckMs). */
  intervalMs: number;
  log?: Logger;
  /** Set to 1 or 0 after every probe (the `toolrouter_redis_up` gauge). */
  gauge?: { set(value: number): void };
}

/**
 * Whether Redis can take toolrouter's writes, found by doing one: a SET and a GET of a key of this instance under the
 * deployment's prefix. A PING proves little: on a cluster it reaches any node, while every toolrouter key lives in the
 * one hash slot of its hash tag (RedisKeys), and a cluster whose node serving that slot is down still answers PING
 * (the outside run saw `/ready` true for 20 s while every catalog write failed with `Too many Cluster redirections`);
 * under Sentinel a write reaches only the current master. A keyed write goes exactly where toolrouter's writes go.
 *
 * `usable` is the cheap, synchronous answer writes consult before sending anything (src/redis/connection.ts RedisGate):
 * false while the connection (or, on a cluster, the connection to the node serving the slot) is down, or while the last
 * probe failed, so a write during an outage is refused at once and nothing is sent.
 */
export class RedisHealth {
  private readonly probeKey: string;
  private readonly slot: number;
  private last: RedisCheck & { at: number } = { ok: true, at: 0 };
  private inFlight: Promise<RedisCheck> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly redis: RedisClient,
    keys: RedisKeys,
    private readonly options: RedisHealthOptions,
  ) {
    // One key per instance, so instances never contend; it expires on its own when the instance goes.
    this.probeKey = keys.key('health', `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`);
    this.slot = keySlot(this.probeKey);
  }

  /** The last probe's verdict (before the first probe: ok, so start-up writes are not refused on no evidence). */
  get lastCheck(): RedisCheck {
    const { ok, detail, shared } = this.last;
    return { ok, ...(detail === undefined ? {} : { detail }), ...(shared ? { shared } : {}) };
  }

  /** False when a write would not reach Redis now: the connection is down, or the last probe failed. */
  get usable(): boolean {
    return this.last.ok && this.connectionProblem() === undefined;
  }

  /** Probes in the background every `intervalMs` (the API; a worker does not serve writes). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), this.options.intervalMs).unref();
    void this.check();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Runs the probe now (one at a time: callers during a probe share it), within `timeoutMs`. */
  check(): Promise<RedisCheck> {
    this.inFlight ??= this.probe().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async probe(): Promise<RedisCheck> {
    const problem = this.connectionProblem();
    const result = problem !== undefined ? { ok: false, detail: problem } : await this.keyedWriteAndRead();
    this.record(result);
    return result;
  }

  private async keyedWriteAndRead(): Promise<RedisCheck> {
    const { timeoutMs } = this.options;
    const value = String(Date.now());
    let timer: NodeJS.Timeout | undefined;
    try {
      const readBack = await Promise.race([
        (async () => {
          await this.redis.set(this.probeKey, value, 'PX', Math.max(60_000, this.options.intervalMs * 10));
          return this.redis.get(this.probeKey);
        })(),
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      if (readBack !== value) return { ok: false, detail: `Redis did not keep a write: read back ${JSON.stringify(readBack)}` };
      return { ok: true };
    } catch (error) {
      const message = (error as Error).message;
      const refusal = (error as Error).name === 'ReplyError' ? REFUSALS.find(([pattern]) => pattern.test(message)) : undefined;
      if (refusal) return { ok: false, shared: true, detail: refusal[1] };
      // No answer in time while the connection (and the slot's node) is up: Redis stalls for everyone.
      if (message.startsWith('no answer within') && this.connectionProblem() === undefined) {
        return { ok: false, shared: true, detail: `Redis did not answer a write within ${timeoutMs} ms (it stalls; the connection is up)` };
      }
      this.options.log?.debug({ err: error }, 'Redis probe failed');
      return { ok: false, detail: `a write to ${this.where()} failed` };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Why a write cannot get through right now, judged from connection states alone; undefined when it may. A node
   * connection still opening is no problem: ioredis opens them lazily (after a failover moved the slot, say), and the
   * probe's own write opens it.
   */
  private connectionProblem(): string | undefined {
    const { redis } = this;
    if (redis.status !== 'ready') return `Redis is not connected (${redis.status})`;
    if (!(redis instanceof Cluster)) return undefined;
    const nodeKey = redis.slots[this.slot]?.[0];
    if (nodeKey === undefined) return `no cluster node serves toolrouter's hash slot ${this.slot}`;
    const node = redis.nodes('master').find((candidate) => `${candidate.options.host}:${candidate.options.port}` === nodeKey);
    if (!node) return `the cluster node ${nodeKey} serving toolrouter's hash slot ${this.slot} is gone`;
    if (['ready', 'wait', 'connecting', 'connect'].includes(node.status)) return undefined;
    return `the cluster node ${nodeKey} serving toolrouter's hash slot ${this.slot} is not connected (${node.status})`;
  }

  private where(): string {
    if (!(this.redis instanceof Cluster)) return 'Redis';
    const nodeKey = this.redis.slots[this.slot]?.[0];
    return `the cluster node serving toolrouter's hash slot ${this.slot}${nodeKey ? ` (${nodeKey})` : ''}`;
  }

  private record(result: RedisCheck): void {
    const was = this.last.ok;
    this.last = { ...result, at: Date.now() };
    this.options.gauge?.set(result.ok ? 1 : 0);
    // One line per change, not one per probe.
    if (was && !result.ok) this.options.log?.warn({ detail: result.detail }, 'Redis cannot take writes; refusing them until it can');
    if (!was && result.ok) this.options.log?.info('Redis takes writes again');
  }
}

/**
 * The cluster hash slot of a key (CRC16/XMODEM of its hash tag, or of the whole key, mod 16384), as Redis computes it:
 * the probe must look at the node serving the very slot toolrouter's keys are in.
 */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  let hashed = key;
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) hashed = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(hashed)) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}
