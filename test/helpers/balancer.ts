import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from './processes.js';

/** A running load balancer in front of toolrouter instances. */
export interface Balancer {
  /** `http://127.0.0.1:<port>`: send requests here. */
  url: string;
  port: number;
  /** What HAProxy printed (its warnings and alerts), for assertion messages. */
  output(): string;
  stop(): Promise<void>;
}

export interface RoundRobinOptions {
  /**
   * How often HAProxy checks each backend's `GET /health`; a backend that fails one check is taken out until it passes
   * one again. A check may take up to 5 s (a loaded machine), so this is how often, not how fast. @defaultValue 2000
   */
  checkIntervalMs?: number;
  /** What the health check asks: `/health` (up) by default; `/ready` as docker/haproxy.cfg does. */
  checkPath?: string;
  /** Failed checks that take a backend out, passed ones that take it back. @defaultValue 1 */
  fall?: number;
  rise?: number;
  /** HAProxy's `retry-on`. @defaultValue 'conn-failure' */
  retryOn?: string;
}

/** Where Debian's package puts HAProxy (`.ci/run` installs it). */
export const HAPROXY = process.env.TEST_HAPROXY ?? '/usr/sbin/haproxy';

/**
 * A real HAProxy as an operator would put it in front of toolrouter (docker/haproxy.cfg has the same balancing
 * settings): round robin, no stickiness of any kind (no cookie, no hashing on Mcp-Session-Id), so consecutive requests
 * of one client reach different instances. A request that could not connect to a backend (one just killed) is retried
 * on another; nothing that reached a backend is retried, so a test sees what a client would.
 */
export async function startRoundRobin(backends: { host: string; port: number }[], options: RoundRobinOptions = {}): Promise<Balancer> {
  if (backends.length === 0) throw new Error('startRoundRobin needs at least one backend');
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-haproxy-'));
  const configFile = path.join(dir, 'haproxy.cfg');
  const inter = options.checkIntervalMs ?? 2000;
  writeFileSync(
    configFile,
    [
      'global',
      '  maxconn 4096',
      'defaults',
      '  mode http',
      '  timeout connect 2s',
      '  timeout check 5s',
      '  timeout client 5m',
      '  timeout server 5m',
      // SSE streams (GET /mcp, streamed POST answers) stay open for long; an idle stream is not an error.
      '  timeout tunnel 1h',
      '  retries 2',
      '  option redispatch 1',
      `  retry-on ${options.retryOn ?? 'conn-failure'}`,
      'frontend toolrouter',
      `  bind 127.0.0.1:${port}`,
      '  default_backend apis',
      'backend apis',
      '  balance roundrobin',
      // An open (keyless) toolrouter answers only loopback Host names, so the check names one, as a client would.
      '  option httpchk',
      `  http-check send meth GET uri ${options.checkPath ?? '/health'} ver HTTP/1.1 hdr Host localhost`,
      '  http-check expect status 200',
      ...backends.map((backend, i) => `  server api${i} ${backend.host}:${backend.port} check inter ${inter} fall ${options.fall ?? 1} rise ${options.rise ?? 1}`),
      '',
    ].join('\n'),
  );
  let output = '';
  const child: ChildProcess = spawn(HAPROXY, ['-db', '-f', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit');
  const spawned = await Promise.race([once(child, 'spawn').then(() => true), once(child, 'error').then(() => false)]);
  if (!spawned) throw new Error(`cannot start ${HAPROXY} (apt-get install haproxy, or set TEST_HAPROXY)`);
  try {
    await untilListening(port, () => child.exitCode !== null || child.signalCode !== null);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`haproxy did not start: ${(error as Error).message}\n${output}`, { cause: error });
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  server.close();
  await once(server, 'close');
  return port;
}

/** Resolves once something accepts connections on the port (bounded: 10 s). */
async function untilListening(port: number, gone: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (gone()) throw new Error('the process exited');
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port} after 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Resolves once six requests in a row through the balancer answered /health: its checks have put every backend in
 * rotation (one that is not yet in would refuse a request's connection, which resets the count).
 */
export async function untilInRotation(balancer: Balancer, timeoutMs: number): Promise<void> {
  let through = 0;
  await eventually(
    async () => (through = (await fetch(`${balancer.url}/health`).then((response) => response.ok, () => false)) ? through + 1 : 0),
    (count) => count >= 6,
    timeoutMs,
  );
}
