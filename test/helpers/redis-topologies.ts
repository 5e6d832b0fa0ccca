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

/** A redis-server (or sentinel) child, killed with the topology; `restart()` brings it back on its port and folder. */
class Server {
  constructor(
    readonly port: number,
    public child: ChildProcess,
    private readonly launch: () => Promise<ChildProcess>,
  ) {}

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async kill(): Promise<void> {
    if (!this.running) return;
    const exited = once(this.child, 'exit');
    this.child.kill('SIGKILL');
    await exited;
  }

  /** Starts it again with the same options (a cluster node finds its nodes.conf and rejoins). */
  async restart(): Promise<void> {
    if (this.running) return;
    this.child = await this.launch();
  }
}

/** `listen(port)`: the options that make it listen there (`--port`, or `--tls-port` with the plain port off). */
async function startServer(
  dir: string,
  args: string[],
  probe: (port: number) => Promise<boolean>,
  options: { sentinel?: boolean; listen?: (port: number) => string[]; port?: number } = {},
): Promise<Server> {
  const listen = options.listen ?? ((port: number) => ['--port', String(port)]);
  for (let attempt = 0; attempt < 10; attempt++) {
    const port = options.port ?? (await freePort());
    const conf = path.join(dir, `${port}.conf`);
    // Sentinel and cluster mode rewrite their config file, so each server gets one of its own (kept on a restart).
    if (options.port === undefined) writeFileSync(conf, '');
    const child = spawn('redis-server', [conf, ...(options.sentinel ? ['--sentinel'] : []), ...listen(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    let exited = false;
    child.once('exit', () => {
      exited = true;
    });
    for (const deadline = Date.now() + 10_000; Date.now() < deadline && !exited; ) {
      if (await probe(port).catch(() => false)) {
        return new Server(port, child, async () => (await startServer(dir, args, probe, { ...options, port })).child);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (!exited) {
      child.kill('SIGKILL');
      throw new Error(`redis-server ${args.join(' ')} on ${port} did not answer within 10 s`);
    }
    if (options.port !== undefined) await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error('no free port for redis-server after 10 attempts');
}

/**
 * A private CA, a server certificate for `redis.test` (the name clients check: it does not name 127.0.0.1) and a
 * client certificate, made with openssl in `dir`. Every server of a TLS topology uses the same pair, and asks clients
 * for the client certificate (mutual TLS, as private-CA deployments often require).
 */
export class TlsMaterial {
  readonly servername = 'redis.test';

  constructor(readonly dir: string) {}

  get caFile(): string {
    return path.join(this.dir, 'ca.crt');
  }
  get certFile(): string {
    return path.join(this.dir, 'client.crt');
  }
  get keyFile(): string {
    return path.join(this.dir, 'client.key');
  }
  /** toolrouter's `redis.tls` for these files. */
  get settings(): { ca: string; cert: string; key: string; servername: string } {
    return { ca: this.caFile, cert: this.certFile, key: this.keyFile, servername: this.servername };
  }
  /** ioredis's `tls` option for these files. */
  get clientOptions(): { ca: Buffer; cert: Buffer; key: Buffer; servername: string } {
    return { ca: readFileSync(this.caFile), cert: readFileSync(this.certFile), key: readFileSync(this.keyFile), servername: this.servername };
  }
  /**
   * redis-server options: TLS only (the plain port off), for clients, replication and the cluster bus alike; the
   * server's own outgoing links (replica to master, sentinel to master) show the client certificate.
   */
  serverArgs(): string[] {
    const file = (name: string) => path.join(this.dir, name);
    return [
      '--tls-cert-file', file('server.crt'), '--tls-key-file', file('server.key'), '--tls-ca-cert-file', file('ca.crt'),
      '--tls-client-cert-file', file('client.crt'), '--tls-client-key-file', file('client.key'),
      '--tls-auth-clients', 'yes', '--tls-replication', 'yes',
    ];
  }
  listen = (port: number): string[] => ['--port', '0', '--tls-port', String(port)];
  probe = (port: number): Promise<boolean> => pings({ host: '127.0.0.1', port, tls: this.clientOptions });
  /** redis-cli's options for these files. */
  cliArgs(): string[] {
    return ['--tls', '--cacert', this.caFile, '--cert', this.certFile, '--key', this.keyFile, '--sni', this.servername];
  }

  static async create(dir: string): Promise<TlsMaterial> {
    const material = new TlsMaterial(dir);
    const file = (name: string) => path.join(dir, name);
    const openssl = (...args: string[]) => run('openssl', args, { cwd: dir });
    await openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=toolrouter test CA', '-keyout', file('ca.key'), '-out', file('ca.crt'));
    await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${material.servername}`, '-keyout', file('server.key'), '-out', file('server.csr'));
    writeFileSync(file('server.ext'), `subjectAltName=DNS:${material.servername}\n`);
    await openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', file('server.ext'), '-out', file('server.crt'));
    await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=toolrouter', '-keyout', file('client.key'), '-out', file('client.csr'));
    await openssl('x509', '-req', '-in', file('client.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1', '-out', file('client.crt'));
    return material;
  }
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

/** What every topology shares: plain or TLS servers in a temporary folder, and clients to them. */
abstract class Topology {
  protected readonly dir: string;
  /** Set by `start()` when the topology runs over TLS. */
  tls: TlsMaterial | undefined;

  constructor(
    kind: string,
    protected readonly options: { tls?: boolean } = {},
  ) {
    this.dir = mkdtempSync(path.join(tmpdir(), `toolrouter-${kind}-`));
  }

  /** toolrouter's `redis.tls`, when over TLS. */
  get tlsSettings(): Record<string, string> | undefined {
    return this.tls?.settings;
  }

  /** A direct client to one server (plain or TLS as the topology runs). */
  client(port: number): Redis {
    const client = new Redis({ host: '127.0.0.1', port, ...(this.tls ? { tls: this.tls.clientOptions } : {}), maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    return client;
  }

  protected async prepare(): Promise<void> {
    if (this.options.tls) this.tls = await TlsMaterial.create(this.dir);
  }

  protected launch(name: string, args: string[], options: { sentinel?: boolean } = {}): Promise<Server> {
    const tls = this.tls;
    return startServer(mkdtempSync(path.join(this.dir, `${name}-`)), [...(tls ? tls.serverArgs() : []), ...args], tls ? tls.probe : plainProbe, {
      ...options,
      ...(tls ? { listen: tls.listen } : {}),
    });
  }

  protected async ask<T>(port: number, work: (client: Redis) => Promise<T>): Promise<T> {
    const client = this.client(port);
    try {
      return await work(client);
    } finally {
      client.disconnect();
    }
  }
}

/**
 * Three masters (and with `replicas`, one replica each, so a master's death is a failover), plain or over TLS (clients,
 * the cluster bus and replication alike). Every slot is served, and keys of different slots live on different processes.
 */
export class RedisClusterFixture extends Topology {
  readonly servers: Server[] = [];

  constructor(options: { replicas?: boolean; tls?: boolean } = {}) {
    super('cluster', options);
  }

  private get replicas(): boolean {
    return (this.options as { replicas?: boolean }).replicas === true;
  }

  /** `redis://` or `rediss://` URLs of the nodes (TLS: the CA, client certificate and name come from `tlsSettings`). */
  get urls(): string[] {
    return this.servers.map((server) => `${this.tls ? 'rediss' : 'redis'}://127.0.0.1:${server.port}`);
  }

  async start(): Promise<void> {
    await this.prepare();
    const count = this.replicas ? 6 : 3;
    for (let i = 0; i < count; i++) {
      const dir = mkdtempSync(path.join(this.dir, 'conf-'));
      // A replica whose link to its master was down a while (a loaded machine) would refuse to take over by default
      // (`cluster-replica-validity-factor` 10); here every failover is wanted, so it always may.
      const args = [
        '--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, 'nodes.conf'), '--appendonly', 'yes', '--cluster-node-timeout', '1000',
        '--cluster-replica-validity-factor', '0',
      ];
      this.servers.push(await this.launch('node', this.tls ? [...args, '--tls-cluster', 'yes'] : args));
    }
    await run('redis-cli', [
      ...(this.tls ? this.tls.cliArgs() : []),
      '--cluster', 'create', ...this.servers.map((server) => `127.0.0.1:${server.port}`), '--cluster-replicas', this.replicas ? '1' : '0', '--cluster-yes',
    ]);
    // `create` returns once the slots are assigned; the nodes agree a moment later.
    await this.untilHealthy(count);
    // A replica that has not finished its first sync cannot take over: a master killed before then stays dead.
    if (this.replicas) for (const server of this.servers) await this.untilReplicated(server.port);
  }

  /**
   * Waits until the master on `port` (if it is one) has a replica online that has everything the master has written
   * so far. Replication is asynchronous: only writes a replica holds survive the master's death, so a test that kills
   * a master and expects its acknowledged writes back waits for this first.
   */
  async untilReplicated(port: number): Promise<void> {
    for (const deadline = Date.now() + 30_000; ; ) {
      const info = String(await this.ask(port, (client) => client.info('replication')).catch(() => ''));
      if (/role:slave/.test(info)) return;
      const written = Number(/master_repl_offset:(\d+)/.exec(info)?.[1] ?? NaN);
      const caughtUp = [...info.matchAll(/slave\d+:[^\r\n]*state=online,offset=(\d+)/g)].some((match) => Number(match[1]) >= written);
      if (caughtUp) return;
      if (Date.now() > deadline) throw new Error(`no replica of ${port} caught up within 30 s: ${info.replace(/\r?\n/g, ' ')}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The server on `port`. */
  server(port: number): Server {
    const found = this.servers.find((server) => server.port === port);
    if (!found) throw new Error(`no cluster node on ${port}`);
    return found;
  }

  /** The port of the master serving `key`'s hash slot, as a running node sees it. */
  async masterOf(key: string): Promise<number> {
    return this.ask(this.running()[0]!.port, async (client) => {
      const slot = Number(await client.cluster('KEYSLOT', key));
      const ranges = (await client.cluster('SLOTS')) as unknown as [number, number, [string, number, string]][];
      const range = ranges.find(([from, to]) => from <= slot && slot <= to);
      if (!range) throw new Error(`no node serves slot ${slot}`);
      return Number(range[2][1]);
    });
  }

  /** Waits until the master of `key`'s slot is another node than `before` and the cluster is ok again (a failover). */
  async untilFailedOver(key: string, before: number): Promise<number> {
    for (const deadline = Date.now() + 30_000; ; ) {
      const master = await this.masterOf(key).catch(() => before);
      if (master !== before && (await this.state(master)) === 'ok') return master;
      if (Date.now() > deadline) throw new Error(`no failover of ${key}'s slot away from ${before} within 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Waits until every running node says cluster_state:ok and knows `known` nodes. */
  async untilHealthy(known: number): Promise<void> {
    for (const deadline = Date.now() + 30_000; ; ) {
      const infos = await Promise.all(this.running().map((server) => this.ask(server.port, (client) => client.cluster('INFO')).catch(() => '')));
      if (infos.every((info) => /cluster_state:ok/.test(String(info)) && new RegExp(`cluster_known_nodes:${known}\\b`).test(String(info)))) return;
      if (Date.now() > deadline) throw new Error(`cluster not ok within 30 s: ${infos.map((info) => String(info).split('\n')[0]).join(' | ')}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * The node on `port` leaves the cluster for good (`redis-cli --cluster del-node`: it must serve no slots, so a
   * replica, or a master whose slots moved away), and its process ends.
   */
  async remove(port: number): Promise<void> {
    const id = await this.ask(port, (client) => client.cluster('MYID'));
    const other = this.running().find((server) => server.port !== port)!;
    await run('redis-cli', [...(this.tls ? this.tls.cliArgs() : []), '--cluster', 'del-node', `127.0.0.1:${other.port}`, String(id)]);
    const server = this.server(port);
    await server.kill();
    this.servers.splice(this.servers.indexOf(server), 1);
  }

  async stop(): Promise<void> {
    for (const server of this.servers) await server.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private running(): Server[] {
    return this.servers.filter((server) => server.running);
  }

  private async state(port: number): Promise<string> {
    const info = String(await this.ask(port, (client) => client.cluster('INFO')).catch(() => ''));
    return /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
  }
}

/**
 * A master with one replica, watched by three Sentinels (quorum 2) under the name `toolrouter`, plain or over TLS
 * (clients, sentinels and replication alike). AOF on both data nodes; `failover()` asks Sentinel to promote the
 * replica, as it would when the master goes away.
 */
export class RedisSentinelFixture extends Topology {
  readonly name = 'toolrouter';
  master!: Server;
  replica!: Server;
  readonly sentinels: Server[] = [];

  constructor(options: { tls?: boolean } = {}) {
    super('sentinel', options);
  }

  get addresses(): string[] {
    return this.sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`);
  }

  async start(): Promise<void> {
    await this.prepare();
    const data = ['--appendonly', 'yes', '--appendfsync', 'always'];
    this.master = await this.launch('master', data);
    this.replica = await this.launch('replica', [...data, '--replicaof', '127.0.0.1', String(this.master.port)]);
    await this.untilReplicaSynced();
    for (let i = 0; i < 3; i++) {
      const args = [
        '--sentinel', 'monitor', this.name, '127.0.0.1', String(this.master.port), '2',
        '--sentinel', 'down-after-milliseconds', this.name, '1000',
        '--sentinel', 'failover-timeout', this.name, '5000',
        '--sentinel', 'parallel-syncs', this.name, '1',
      ];
      this.sentinels.push(await this.launch('sentinel', args, { sentinel: true }));
    }
    // Sentinels find the replica and each other through the master's hello channel; a failover needs both.
    await this.untilSentinelsSee();
  }

  /** The address Sentinel currently names as master. */
  async masterPort(): Promise<number> {
    return this.ask(this.sentinels[0]!.port, async (client) => {
      const [, port] = (await client.call('SENTINEL', 'get-master-addr-by-name', this.name)) as [string, string];
      return Number(port);
    });
  }

  /** SENTINEL FAILOVER, then waits until every Sentinel names the old replica as master. */
  async failover(): Promise<void> {
    const before = await this.masterPort();
    await this.ask(this.sentinels[0]!.port, (client) => client.call('SENTINEL', 'failover', this.name));
    await this.untilMasterMoved(before);
  }

  /** Waits until every Sentinel names a master other than `before`, and that server says it is master. */
  async untilMasterMoved(before: number): Promise<number> {
    for (const deadline = Date.now() + 30_000; ; ) {
      const ports = await Promise.all(
        this.sentinels.map((sentinel) =>
          this.ask(sentinel.port, async (client) => Number(((await client.call('SENTINEL', 'get-master-addr-by-name', this.name)) as string[])[1])).catch(() => before),
        ),
      );
      const role = await this.ask(ports[0]!, async (client) => ((await client.call('ROLE')) as [string])[0]).catch(() => 'unknown');
      if (ports.every((port) => port !== before && port === ports[0]) && role === 'master') return ports[0]!;
      if (Date.now() > deadline) throw new Error(`failover did not complete within 30 s (sentinels name ${ports.join(', ')})`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The data server (master or replica) on `port`. */
  server(port: number): Server {
    const found = [this.master, this.replica].find((server) => server.port === port);
    if (!found) throw new Error(`no data server on ${port}`);
    return found;
  }

  async stop(): Promise<void> {
    for (const server of [...this.sentinels, this.replica, this.master]) await server?.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async untilReplicaSynced(): Promise<void> {
    await this.ask(this.replica.port, async (client) => {
      for (const deadline = Date.now() + 20_000; ; ) {
        if (/master_link_status:up/.test(await client.info('replication'))) return;
        if (Date.now() > deadline) throw new Error('replica did not sync within 20 s');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
  }

  private async untilSentinelsSee(): Promise<void> {
    for (const sentinel of this.sentinels) {
      await this.ask(sentinel.port, async (client) => {
        for (const deadline = Date.now() + 30_000; ; ) {
          const master = (await client.call('SENTINEL', 'master', this.name)) as string[];
          const field = (name: string) => Number(master[master.indexOf(name) + 1]);
          if (field('num-slaves') >= 1 && field('num-other-sentinels') >= 2) break;
          if (Date.now() > deadline) throw new Error(`sentinel ${sentinel.port} does not see the replica and the other sentinels`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      });
    }
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
  private material!: TlsMaterial;
  server!: Server;

  get caFile(): string {
    return this.material.caFile;
  }

  /** The client certificate and key the server asks for (signed by the same CA). */
  get certFile(): string {
    return this.material.certFile;
  }

  get keyFile(): string {
    return this.material.keyFile;
  }

  get url(): string {
    return `rediss://127.0.0.1:${this.server.port}`;
  }

  async start(): Promise<void> {
    this.material = await TlsMaterial.create(this.dir);
    this.server = await startServer(this.dir, [...this.material.serverArgs(), '--appendonly', 'no'], this.material.probe, { listen: this.material.listen });
  }

  async stop(): Promise<void> {
    await this.server?.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
