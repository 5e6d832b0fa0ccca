import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/** A Redis of this test's own, so it can be stopped and started without disturbing anything else. */
export class PrivateRedis {
  private process: ChildProcess | undefined;
  constructor(readonly port: number) {}

  async start(): Promise<void> {
    this.process = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    for await (const chunk of this.process.stdout!) {
      output += String(chunk);
      if (output.includes('Ready to accept connections')) return;
    }
    throw new Error(`redis-server did not start: ${output}`);
  }

  async stop(): Promise<void> {
    if (!this.process) return;
    const exited = once(this.process, 'exit');
    this.process.kill('SIGKILL');
    await exited;
    this.process = undefined;
  }
}

/** A port for a private Redis, away from the shared one and from other tests' picks. */
export function randomRedisPort(): number {
  return 20_000 + Math.floor(Math.random() * 20_000);
}
