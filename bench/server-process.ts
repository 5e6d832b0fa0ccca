/**
 * The benchmarked server as a process of its own (bench/serve.ts), shared by `npm run bench`, bench/put.ts and
 * bench/profile-http.ts: start it, read its resident memory, PUT a catalog and wait until it is searchable.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Tool } from '../src/catalog/types.js';
import { startFlags } from './start-flags.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface BenchServer {
  base: string;
  /** The process's resident set as the kernel counts it: every thread, native allocations included. */
  rssMb(): number;
  stop(): Promise<void>;
}

/**
 * bench/serve.ts in a new process with `npm start`'s Node flags, `env` added and `nodeArgs` before the script (e.g.
 * --cpu-prof); resolves once it listens.
 */
export async function startBenchServer(env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<BenchServer> {
  const child = spawn(process.execPath, [...startFlags(), ...nodeArgs, '--import', 'tsx', path.join(ROOT, 'bench/serve.ts')], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n').find((candidate) => candidate.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { port: number }).port);
    });
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code} before listening`)));
  });
  let stopped = false;
  return {
    base: `http://127.0.0.1:${port}`,
    rssMb: () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * PUT the catalog as one static source and wait until the index status shows it indexed. `putMs`: the PUT's answer;
 * `searchableMs`: until searchable, from the same start.
 */
export async function putCatalog(
  base: string,
  /** The tools, or their `{tools}` body already serialized (so the timing leaves serialization out). */
  tools: Tool[] | string,
  headers: Record<string, string> = {},
): Promise<{ putMs: number; searchableMs: number }> {
  const body = typeof tools === 'string' ? tools : JSON.stringify({ tools });
  const started = performance.now();
  const put = await fetch(`${base}/v1/catalog/sources/bench`, {
    method: 'PUT',
    headers: { ...headers, 'content-type': 'application/json' },
    body,
  });
  if (!put.ok) throw new Error(`PUT catalog: ${put.status} ${await put.text()}`);
  const putMs = performance.now() - started;
  const { catalogHash } = (await put.json()) as { catalogHash: string };
  // Bounded by the build: 20 ms polls for at most 10 minutes.
  for (const deadline = performance.now() + 600_000; performance.now() < deadline; ) {
    const status = (await (await fetch(`${base}/v1/index/status`, { headers })).json()) as { state: string; indexedHash: string | null; lastError?: string };
    if (status.indexedHash === catalogHash && status.state === 'ready') return { putMs, searchableMs: performance.now() - started };
    if (status.state === 'failed') throw new Error(`index build failed: ${status.lastError}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('index not ready after 10 minutes');
}
