import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { REPO_ROOT } from './paths.js';

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A config file for child processes (YAML is a superset of JSON). */
export function writeConfig(config: Record<string, unknown>): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'toolrouter-test-')), 'config.json');
  writeFileSync(file, JSON.stringify(config));
  return file;
}

/** A real worker process (`workers/indexer.ts`) whose JSON log lines the test can read and wait for. */
export class WorkerProcess {
  readonly logs: Record<string, unknown>[] = [];
  private readonly child: ChildProcess;
  private readonly listeners = new Set<() => void>();
  exited: Promise<number | null>;

  constructor(readonly configFile: string) {
    this.child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'workers/indexer.ts')], {
      cwd: REPO_ROOT,
      env: { ...process.env, TOOLROUTER_CONFIG: configFile, LOG_LEVEL: 'info', REDIS_URL: '' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    collectJsonLines(this.child.stderr!, this.logs, () => {
      for (const listener of this.listeners) listener();
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  /** Log lines of finished builds that really built (not skipped or reused). */
  builds(): Record<string, unknown>[] {
    return this.logs.filter((line) => line.msg === 'index build finished' && line.outcome === 'built');
  }

  /**
   * The finished-build log line of `catalogHash`'s job. The API hears the swap over Redis pub/sub, which can overtake
   * the worker's log line on its way through the stderr pipe (a loaded machine): tests that look at what a build
   * embedded wait for this line instead of taking the last one seen.
   */
  buildOf(catalogHash: string): Promise<Record<string, unknown>> {
    return this.waitFor((line) => line.msg === 'index build finished' && line.jobId === catalogHash);
  }

  async waitFor(predicate: (line: Record<string, unknown>) => boolean, timeoutMs = 60_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.logs.find(predicate);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`worker log line not seen in ${timeoutMs} ms; last lines: ${JSON.stringify(this.logs.slice(-5))}`);
      await new Promise<void>((resolve) => {
        this.listeners.add(resolve);
        setTimeout(resolve, 200);
      });
    }
  }

  ready(): Promise<Record<string, unknown>> {
    return this.waitFor((line) => line.msg === 'index worker ready');
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<number | null> {
    this.child.kill(signal);
    return this.exited;
  }
}

/** Polls until the check passes, failing with the last observed value. */
export async function eventually<T>(check: () => Promise<T> | T, accept: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await check();
    if (accept(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`condition not met within ${timeoutMs} ms; last value: ${JSON.stringify(last)}`);
}

/** Parses a child's JSON log lines (pino) as they come into `logs`; lines that are not JSON are kept as `{msg}`. */
export function collectJsonLines(stream: NodeJS.ReadableStream, logs: Record<string, unknown>[], onLines: () => void): void {
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        logs.push({ msg: line });
      }
    }
    onLines();
  });
}

/** Deletes what a test's instances left in the shared Redis: keys under `prefix` and its BullMQ index queue's. */
export async function dropPrefixKeys(prefix: string, url = REDIS_URL): Promise<void> {
  const redis = new Redis(url);
  try {
    const leftovers = [...(await redis.keys(`${prefix}*`)), ...(await redis.keys(`bull:${prefix}-index:*`))];
    if (leftovers.length > 0) await redis.del(...leftovers);
  } finally {
    redis.disconnect();
  }
}
