import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, Socket, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { Redis } from 'ioredis';

/** A TCP port the OS has just handed out (bound to 0, then released), so it is not one another test picked. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || !address) throw new Error('no port from the OS');
  return address.port;
}

/**
 * A redis-server of this test's own, on a port the OS picked, so it can be stopped and started without disturbing
 * anything else. Should another process take the port between the pick and redis-server's bind, a first start picks
 * again; a restart keeps its port (clients reconnect to it) and retries the bind for a few seconds.
 */
export class PrivateRedis {
  private process: ChildProcess | undefined;
  private chosenPort: number | undefined;
  private readonly dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-redis-'));

  /** `persistent`: an append-only file in a temporary folder, so a restart keeps the data (else it comes back empty). */
  constructor(private readonly options: { persistent?: boolean } = {}) {}

  get port(): number {
    if (this.chosenPort === undefined) throw new Error('PrivateRedis: start() it before asking for its port');
    return this.chosenPort;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const restart = this.chosenPort !== undefined;
    for (let attempt = 0; ; attempt++) {
      this.chosenPort ??= await freePort();
      if (await this.launch(this.chosenPort)) return;
      if (attempt >= 20) throw new Error(`redis-server could not listen on port ${this.chosenPort}`);
      if (restart) await new Promise((resolve) => setTimeout(resolve, 250));
      else this.chosenPort = undefined;
    }
  }

  /** Kills the server (SIGKILL, as a crash would): without `persistent` its data is gone. */
  async stop(): Promise<void> {
    if (!this.process) return;
    const exited = once(this.process, 'exit');
    this.process.kill('SIGKILL');
    await exited;
    this.process = undefined;
  }

  /** Stops the server and removes its data files, so the next start comes back empty even when persistent. */
  async wipe(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true });
  }

  /** Started and answering PING: true; exited (the port was taken): false. */
  private async launch(port: number): Promise<boolean> {
    const persistence = this.options.persistent ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'];
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', ...persistence], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    let exited = false;
    child.once('exit', () => {
      exited = true;
    });
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {});
    try {
      for (const deadline = Date.now() + 10_000; Date.now() < deadline && !exited; ) {
        try {
          if (probe.status !== 'ready') await probe.connect();
          if ((await probe.ping()) === 'PONG') {
            this.process = child;
            return true;
          }
        } catch {
          probe.disconnect();
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    } finally {
      probe.disconnect();
    }
    if (!exited) {
      child.kill('SIGKILL');
      throw new Error(`redis-server on port ${port} did not answer PING within 10 s`);
    }
    return false;
  }
}

/**
 * A TCP relay between one API instance and Redis, which the test can cut: while cut, open connections are dropped and
 * new ones are closed at once (Redis looks gone to that instance only, and it keeps reconnecting).
 */
export class RedisLink {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private cutOff = false;
  port = 0;
  /**
   * Holds every command on its way to Redis this long (a slow network or a busy Redis, as this instance sees it);
   * what was sent keeps its order when the delay changes.
   */
  delayMs = 0;

  constructor(private readonly target: () => number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const server = createServer((client) => {
      if (this.cutOff) {
        client.destroy();
        return;
      }
      const upstream = new Socket();
      upstream.connect(this.target(), '127.0.0.1');
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      let last = 0;
      const delayed = new Transform({
        transform: (chunk: Buffer, _encoding, done) => {
          done();
          if (this.delayMs === 0 && last <= Date.now()) {
            delayed.push(chunk);
            return;
          }
          last = Math.max(Date.now() + this.delayMs, last);
          setTimeout(() => delayed.push(chunk), last - Date.now());
        },
      });
      client.pipe(delayed).pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    this.server = server;
  }

  cut(): void {
    this.cutOff = true;
    for (const socket of this.sockets) socket.destroy();
  }

  restore(): void {
    this.cutOff = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
