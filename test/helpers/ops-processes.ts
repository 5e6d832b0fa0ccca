import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { REPO_ROOT } from './paths.js';
import { collectJsonLines } from './processes.js';

/**
 * The CLI from its TypeScript sources, so tests exercise the code as it is now without a build (bin/toolrouter.js runs
 * the compiled dist/; test/packaging.test.ts covers that path).
 */
export const CLI = ['--import', import.meta.resolve('tsx'), path.join(REPO_ROOT, 'src/cli.ts')];

/**
 * `toolrouter <args>` as a deployment runs it, with its JSON log lines (stderr) readable by the test.
 * The environment is the test's minus what would leak the developer's settings into the child.
 */
export class CliProcess {
  readonly logs: Record<string, unknown>[] = [];
  stdout = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;
  private readonly listeners = new Set<() => void>();

  constructor(args: string[], env: Record<string, string> = {}) {
    const base = { ...process.env };
    for (const name of ['TOOLROUTER_CONFIG', 'REDIS_URL', 'ADMIN_KEY', 'PORT', 'HOST', 'UPSTREAM_LLM_URL', 'UPSTREAM_LLM_KEY', 'WORKER_METRICS_PORT']) delete base[name];
    this.child = spawn(process.execPath, [...CLI, ...args], { cwd: REPO_ROOT, env: { ...base, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.on('data', (chunk: Buffer) => (this.stdout += chunk.toString()));
    collectJsonLines(this.child.stderr!, this.logs, () => {
      for (const listener of this.listeners) listener();
    });
    this.exited = once(this.child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  }

  get pid(): number {
    return this.child.pid!;
  }

  async waitFor(predicate: (line: Record<string, unknown>) => boolean, timeoutMs = 60_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    let exited = false;
    void this.exited.then(() => (exited = true));
    for (;;) {
      const found = this.logs.find(predicate);
      if (found) return found;
      if (exited || Date.now() > deadline) {
        throw new Error(`log line not seen (${exited ? 'process exited' : `${timeoutMs} ms`}); last lines: ${JSON.stringify(this.logs.slice(-5))}`);
      }
      await new Promise<void>((resolve) => {
        this.listeners.add(resolve);
        setTimeout(resolve, 200);
      });
    }
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** `toolrouter serve`; resolves once it listens, with its base URL. */
export async function startServe(configFile: string, env: Record<string, string> = {}): Promise<{ process: CliProcess; url: string }> {
  const child = new CliProcess(['--config', configFile, 'serve'], env);
  const line = await child.waitFor((l) => l.msg === 'toolrouter listening');
  return { process: child, url: `http://127.0.0.1:${String(line.port)}` };
}

/** `toolrouter worker` with a metrics port; resolves once it takes jobs, with its metrics URL. */
export async function startWorker(configFile: string, env: Record<string, string> = {}): Promise<{ process: CliProcess; metricsUrl: string }> {
  const child = new CliProcess(['--config', configFile, 'worker'], { WORKER_METRICS_PORT: '0', ...env });
  const line = await child.waitFor((l) => l.msg === 'worker metrics listening');
  await child.waitFor((l) => l.msg === 'index worker ready');
  return { process: child, metricsUrl: `http://127.0.0.1:${String(line.port)}/metrics` };
}

/** Reads one sample's value from Prometheus text output (undefined when absent). */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return undefined;
}

/**
 * Runs a command to its end (`node <args>`, from the repository root; pass `...CLI, 'audit', 'verify'` for the CLI),
 * without the developer's own settings leaking in, and answers its exit code and output.
 */
export async function runToEnd(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base = { ...process.env };
  for (const name of ['TOOLROUTER_CONFIG', 'REDIS_URL', 'ADMIN_KEY', 'LOG_LEVEL']) delete base[name];
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
