import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis, type RedisOptions } from 'ioredis';
import { freePort } from './redis-server.js';

const run = promisify(execFile);

/*
 * Redis the way production runs it, started by the tests on loopback: a 3-master Cluster, a master + replica watched by
 * three Sentinels, and a TLS-only Redis with a CA and server certificate made here with openssl. Every server runs in
 * a temporary folder on ports the OS picked, and is killed by `stop()`.
 */

/** A redis-server (or sentinel) child, killed with the topology. */
class Server {
  constructor(
    readonly port: number,
    readonly child: ChildProcess,
  ) {}

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = once(this.child, 'exit');
    this.child.kill('SIGKILL');
    await exited;
  }
}

/** `listen(port)`: the options that make it listen there (`--port`, or `--tls-port` with the plain port off). */
async function startServer(
  dir: string,
  args: string[],
  probe: (port: number) => Promise<boolean>,
  options: { sentinel?: boolean; listen?: (port: number) => string[] } = {},
): Promise<Server> {
  const listen = options.listen ?? ((port: number) => ['--port', String(port)]);
  for (let attempt = 0; attempt < 10; attempt++) {
    const port = await freePort();
    const conf = path.join(dir, `${port}.conf`);
    // Sentinel and cluster mode rewrite their config file, so each server gets one of its own.
    writeFileSync(conf, '');
    const child = spawn('redis-server', [conf, ...(options.sentinel ? ['--sentinel'] : []), ...listen(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    let exited = false;
    child.once('exit', () => {
      exited = true;
    });
    for (const deadline = Date.now() + 10_000; Date.now() < deadline && !exited; ) {
      if (await probe(port).catch(() => false)) return new Server(port, child);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (!exited) {
      child.kill('SIGKILL');
      throw new Error(`redis-server ${args.join(' ')} on ${port} did not answer within 10 s`);
    }
  }
  throw new Error('no free port for redis-server after 10 attempts');
}

async function pings(options: RedisOptions): Promise<boolean> {
  const client = new Redis({ ...options, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } finally {
    client.disconnect();
  }
}

const plainProbe = (port: number) => pings({ host: '127.0.0.1', port });

/** Three masters, no replicas: every slot is served, and keys of different slots live on different processes. */
export class RedisClusterFixture {
  private readonly dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-cluster-'));
  readonly servers: Server[] = [];

  get urls(): string[] {
    return this.servers.map((server) => `redis://127.0.0.1:${server.port}`);
  }

  async start(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      const dir = mkdtempSync(path.join(this.dir, 'node-'));
      this.servers.push(await startServer(dir, ['--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, 'nodes.conf'), '--appendonly', 'yes'], plainProbe));
    }
    await run('redis-cli', ['--cluster', 'create', ...this.servers.map((server) => `127.0.0.1:${server.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    // `create` returns once the slots are assigned; the nodes agree a moment later.
    const probe = new Redis({ host: '127.0.0.1', port: this.servers[0]!.port });
    try {
      for (const deadline = Date.now() + 20_000; ; ) {
        const info = await probe.cluster('INFO');
        if (/cluster_state:ok/.test(String(info)) && /cluster_known_nodes:3/.test(String(info))) break;
        if (Date.now() > deadline) throw new Error(`cluster not ok within 20 s: ${String(info)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      probe.disconnect();
    }
  }

  async stop(): Promise<void> {
    for (const server of this.servers) await server.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A master with one replica, watched by three Sentinels (quorum 2) under the name `toolrouter`. AOF on both data nodes;
 * `failover()` asks Sentinel to promote the replica, as it would when the master goes away.
 */
export class RedisSentinelFixture {
  readonly name = 'toolrouter';
  private readonly dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-sentinel-'));
  master!: Server;
  replica!: Server;
  readonly sentinels: Server[] = [];

  get addresses(): string[] {
    return this.sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`);
  }

  async start(): Promise<void> {
    const data = ['--appendonly', 'yes', '--appendfsync', 'always'];
    this.master = await startServer(mkdtempSync(path.join(this.dir, 'master-')), data, plainProbe);
    this.replica = await startServer(mkdtempSync(path.join(this.dir, 'replica-')), [...data, '--replicaof', '127.0.0.1', String(this.master.port)], plainProbe);
    await this.untilReplicaSynced();
    for (let i = 0; i < 3; i++) {
      const args = [
        '--sentinel', 'monitor', this.name, '127.0.0.1', String(this.master.port), '2',
        '--sentinel', 'down-after-milliseconds', this.name, '1000',
        '--sentinel', 'failover-timeout', this.name, '5000',
        '--sentinel', 'parallel-syncs', this.name, '1',
      ];
      this.sentinels.push(await startServer(mkdtempSync(path.join(this.dir, 'sentinel-')), args, plainProbe, { sentinel: true }));
    }
    // Sentinels find the replica and each other through the master's hello channel; a failover needs both.
    await this.untilSentinelsSee();
  }

  /** The address Sentinel currently names as master. */
  async masterPort(): Promise<number> {
    const client = new Redis({ host: '127.0.0.1', port: this.sentinels[0]!.port });
    try {
      const [, port] = (await client.call('SENTINEL', 'get-master-addr-by-name', this.name)) as [string, string];
      return Number(port);
    } finally {
      client.disconnect();
    }
  }

  /** SENTINEL FAILOVER, then waits until every Sentinel names the old replica as master. */
  async failover(): Promise<void> {
    const before = await this.masterPort();
    const client = new Redis({ host: '127.0.0.1', port: this.sentinels[0]!.port });
    try {
      await client.call('SENTINEL', 'failover', this.name);
    } finally {
      client.disconnect();
    }
    for (const deadline = Date.now() + 30_000; ; ) {
      const ports = await Promise.all(this.sentinels.map(async (sentinel) => {
        const c = new Redis({ host: '127.0.0.1', port: sentinel.port });
        try {
          return Number(((await c.call('SENTINEL', 'get-master-addr-by-name', this.name)) as string[])[1]);
        } finally {
          c.disconnect();
        }
      }));
      const role = await roleOf(ports[0]!);
      if (ports.every((port) => port !== before && port === ports[0]) && role === 'master') return;
      if (Date.now() > deadline) throw new Error(`failover did not complete within 30 s (sentinels name ${ports.join(', ')})`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async stop(): Promise<void> {
    for (const server of [...this.sentinels, this.replica, this.master]) await server?.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async untilReplicaSynced(): Promise<void> {
    const client = new Redis({ host: '127.0.0.1', port: this.replica.port });
    try {
      for (const deadline = Date.now() + 20_000; ; ) {
        if (/master_link_status:up/.test(await client.info('replication'))) return;
        if (Date.now() > deadline) throw new Error('replica did not sync within 20 s');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      client.disconnect();
    }
  }

  private async untilSentinelsSee(): Promise<void> {
    for (const sentinel of this.sentinels) {
      const client = new Redis({ host: '127.0.0.1', port: sentinel.port });
      try {
        for (const deadline = Date.now() + 30_000; ; ) {
          const master = (await client.call('SENTINEL', 'master', this.name)) as string[];
          const field = (name: string) => Number(master[master.indexOf(name) + 1]);
          if (field('num-slaves') >= 1 && field('num-other-sentinels') >= 2) break;
          if (Date.now() > deadline) throw new Error(`sentinel ${sentinel.port} does not see the replica and the other sentinels`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      } finally {
        client.disconnect();
      }
    }
  }
}

async function roleOf(port: number): Promise<string> {
  const client = new Redis({ host: '127.0.0.1', port });
  try {
    const [role] = (await client.call('ROLE')) as [string];
    return role;
  } finally {
    client.disconnect();
  }
}

/**
 * A Redis that speaks TLS only (its plain port is off), with a certificate for `redis.test` signed by a CA made here;
 * clients must trust `caFile`, ask for `servername: 'redis.test'` (the certificate does not name 127.0.0.1) and show
 * the client certificate `certFile`/`keyFile` (mutual TLS, as private-CA deployments often require).
 */
export class TlsRedisFixture {
  readonly servername = 'redis.test';
  private readonly dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-tls-'));
  server!: Server;

  get caFile(): string {
    return path.join(this.dir, 'ca.crt');
  }

  /** The client certificate and key the server asks for (signed by the same CA). */
  get certFile(): string {
    return path.join(this.dir, 'client.crt');
  }

  get keyFile(): string {
    return path.join(this.dir, 'client.key');
  }

  get url(): string {
    return `rediss://127.0.0.1:${this.server.port}`;
  }

  async start(): Promise<void> {
    const file = (name: string) => path.join(this.dir, name);
    const openssl = (...args: string[]) => run('openssl', args, { cwd: this.dir });
    await openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=toolrouter test CA', '-keyout', file('ca.key'), '-out', file('ca.crt'));
    await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${this.servername}`, '-keyout', file('server.key'), '-out', file('server.csr'));
    writeFileSync(file('server.ext'), `subjectAltName=DNS:${this.servername}\n`);
    await openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', file('server.ext'), '-out', file('server.crt'));
    await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=toolrouter', '-keyout', file('client.key'), '-out', file('client.csr'));
    await openssl('x509', '-req', '-in', file('client.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1', '-out', file('client.crt'));
    const ca = readFileSync(this.caFile);
    const client = { cert: readFileSync(this.certFile), key: readFileSync(this.keyFile) };
    this.server = await startServer(
      this.dir,
      ['--tls-cert-file', file('server.crt'), '--tls-key-file', file('server.key'), '--tls-ca-cert-file', file('ca.crt'), '--tls-auth-clients', 'yes', '--appendonly', 'no'],
      (port) => pings({ host: '127.0.0.1', port, tls: { ca, servername: this.servername, ...client } }),
      { listen: (port) => ['--port', '0', '--tls-port', String(port)] },
    );
  }

  async stop(): Promise<void> {
    await this.server?.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
