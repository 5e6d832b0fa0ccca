import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { rootCertificates } from 'node:tls';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { collectJsonLines, eventually, writeConfig } from '../helpers/processes.js';
import { childrenOf, npxStyleWrapper, running } from '../helpers/process-tree.js';
import { freePort } from '../helpers/redis-server.js';

const run = promisify(execFile);
const CLI = [process.execPath, '--import', 'tsx', path.join(REPO_ROOT, 'src/cli.ts')];

/** The environment of a new user: none of the developer's toolrouter settings. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['TOOLROUTER_CONFIG', 'REDIS_URL', 'ADMIN_KEY', 'PORT', 'HOST', 'LOG_LEVEL', 'STATE_DIR']) delete env[name];
  return { ...env, ...extra };
}

/** A started process's JSON log, and the 'toolrouter listening' line once it comes (or the exit, whichever first). */
async function listening(child: ChildProcess, timeoutMs = 180_000): Promise<{ logs: Record<string, unknown>[]; line: Record<string, unknown> }> {
  const logs: Record<string, unknown>[] = [];
  collectJsonLines(child.stderr!, logs, () => {});
  const line = await eventually(
    () => logs.find((entry) => entry.msg === 'toolrouter listening'),
    (found) => found !== undefined || child.exitCode !== null,
    timeoutMs,
  );
  assert.ok(line, `did not start: ${JSON.stringify(logs.slice(-5))}`);
  return { logs, line };
}

async function refused(url: string): Promise<boolean> {
  try {
    await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return false;
  } catch {
    return true;
  }
}

describe('the first hour: CLI and service papercuts', { timeout: 10 * 60_000 }, () => {
  const children: ChildProcess[] = [];
  /** Process groups started here: a server left behind by a failed `npm start` is in its group, and holds its pipe. */
  const groups: number[] = [];
  after(async () => {
    for (const group of groups) {
      try {
        process.kill(-group, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
      child.stderr?.destroy();
    }
  });

  test('toolrouter --version prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const { stdout } = await run(CLI[0]!, [...CLI.slice(1), flag], { env: cleanEnv() });
      assert.equal(stdout.trim(), version);
    }
  });

  test('serve --port/--host win over PORT/HOST; the start log names the URL and the console; GET / leads to the console, key or not', async () => {
    const port = await freePort();
    const child = spawn(CLI[0]!, [...CLI.slice(1), 'serve', '--port', String(port), '--host', '127.0.0.1'], {
      cwd: REPO_ROOT,
      env: cleanEnv({ PORT: '1', HOST: '0.0.0.0', LOG_LEVEL: 'info', ADMIN_KEY: 'first-hour-admin-key-0123456789' }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(child);
    const { line } = await listening(child);
    assert.equal(line.port, port);
    assert.equal(line.host, '127.0.0.1');
    assert.equal(line.url, `http://127.0.0.1:${port}/`);
    assert.equal(line.console, `http://127.0.0.1:${port}/console/`);
    for (const headers of [{}, { authorization: 'Bearer first-hour-admin-key-0123456789' }]) {
      const root = await fetch(`http://127.0.0.1:${port}/`, { redirect: 'manual', headers });
      assert.equal(root.status, 302);
      assert.equal(root.headers.get('location'), '/console/');
    }
    const page = await fetch(`http://127.0.0.1:${port}/console/`);
    assert.equal(page.status, 200);
    // An icon for the console's tab, and at the root where browsers ask for one on any page: no key needed for it.
    assert.match(await page.text(), /<link rel="icon" href="\/console\/favicon\.svg"/);
    for (const icon of ['/favicon.ico', '/console/favicon.svg']) {
      const response = await fetch(`http://127.0.0.1:${port}${icon}`);
      assert.equal(response.status, 200, icon);
      assert.match(response.headers.get('content-type') ?? '', /^image\/svg\+xml/);
      assert.match(await response.text(), /^<svg /);
    }
    // The redirect is the root only: the API beside it still needs the key.
    assert.equal((await fetch(`http://127.0.0.1:${port}/v1/mcp/servers`)).status, 401);
    child.kill('SIGTERM');
    await once(child, 'exit');
  });

  // Node below the supported range, where the machine has one (Debian's packaged node is 20): refused in one line
  // before anything loads, whatever the command.
  const oldNode = '/usr/bin/node';
  const oldMajor = existsSync(oldNode) ? Number(spawnSync(oldNode, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }).stdout.trim()) : 0;
  test('an unsupported Node is refused in one line by bin/toolrouter.js', { skip: oldMajor === 0 || oldMajor >= 22 ? `no Node below 22 at ${oldNode}` : false }, async () => {
    for (const args of [['--version'], ['serve', '--port', '0']]) {
      const result = spawnSync(oldNode, [path.join(REPO_ROOT, 'bin/toolrouter.js'), ...args], { env: cleanEnv(), encoding: 'utf8' });
      assert.equal(result.status, 1);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, /^toolrouter: Node \d+\.\d+\.\d+ is not supported; it needs Node \^22\.15\.0 or >=24 \(package\.json engines\): install Node 24 LTS\n$/);
    }
  });

  test('serve refuses a port that is not one, before starting anything; `toolrouter --port` is serve too', async () => {
    for (const args of [['serve', '--port', '70000'], ['--port', '70000']]) {
      const failed = await run(CLI[0]!, [...CLI.slice(1), ...args], { env: cleanEnv() }).then(
        () => assert.fail(`${args.join(' ')} accepted port 70000`),
        (error: { code: number; stderr: string }) => error,
      );
      assert.equal(failed.code, 2);
      // Not "unknown option '--port'": with no command, the options are serve's.
      assert.match(failed.stderr, /--port.*must be a port number/);
    }
  });

  test('a stdio client that connects, lists and leaves: no error-level log line, no stack', async () => {
    const transport = new StdioClientTransport({
      command: CLI[0]!,
      args: [...CLI.slice(1), 'stdio'],
      cwd: REPO_ROOT,
      env: cleanEnv({ LOG_LEVEL: 'info' }) as Record<string, string>,
      stderr: 'pipe',
    });
    const logs: Record<string, unknown>[] = [];
    collectJsonLines(transport.stderr! as NodeJS.ReadableStream, logs, () => {});
    const client = new Client({ name: 'first-hour', version: '1.0.0' });
    await client.connect(transport);
    await client.listTools();
    // Leaves at once, while the first index build is still running: the build is abandoned, not failed.
    const pid = transport.pid!;
    await client.close();
    await eventually(() => running(pid), (alive) => !alive, 30_000);
    const errors = logs.filter((line) => typeof line.level === 'number' && line.level >= 50);
    assert.deepEqual(errors, [], JSON.stringify(errors).slice(0, 2_000));
  });

  test('SIGTERM to `npm start` stops the server it started (no shell left holding it)', async () => {
    const port = await freePort();
    // detached: its own process group, so the signal below reaches npm alone, as `kill -TERM <pid>` from a user does.
    const npm = spawn('npm', ['start', '--silent'], { cwd: REPO_ROOT, env: cleanEnv({ PORT: String(port), LOG_LEVEL: 'info' }), stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    children.push(npm);
    groups.push(npm.pid!);
    await listening(npm, 8 * 60_000);
    assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
    process.kill(npm.pid!, 'SIGTERM');
    await once(npm, 'exit');
    // The server shuts down gracefully; with a shell between npm and node it stayed up, orphaned, still listening.
    await eventually(() => refused(`http://127.0.0.1:${port}/health`), (gone) => gone, 15_000);
  });
});

describe('the first hour: a stdio upstream launched as `npx` launches it', { timeout: 10 * 60_000 }, () => {
  const children: ChildProcess[] = [];
  /** Every process an upstream started, for the clean-up when a test fails half-way. */
  const started: number[] = [];
  after(async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
      child.stderr?.destroy();
    }
    for (const pid of started) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone, as it should be.
      }
    }
  });

  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-first-hour-'));
  // A real certificate file (the first of Node's bundled roots), so toolrouter itself starts without a warning.
  const caFile = path.join(dir, 'extra-ca.pem');
  writeFileSync(caFile, rootCertificates[0]!);
  const network = {
    HTTPS_PROXY: 'http://127.0.0.1:3129',
    http_proxy: 'http://127.0.0.1:3130',
    NO_PROXY: '127.0.0.1,localhost',
    NODE_EXTRA_CA_CERTS: caFile,
    SSL_CERT_FILE: caFile,
    SSL_CERT_DIR: dir,
  };
  const wrapper = npxStyleWrapper();
  const readPid = (file: string) => (existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) || undefined : undefined);

  async function serveWith(servers: Record<string, unknown>, connectTimeoutMs: number): Promise<{ child: ChildProcess; url: string }> {
    const port = await freePort();
    const config = writeConfig({ mcp: { servers, connectTimeoutMs, reconnect: { initialMs: 60_000, maxMs: 60_000 } } });
    const child = spawn(CLI[0]!, [...CLI.slice(1), '--port', String(port)], {
      cwd: REPO_ROOT,
      env: cleanEnv({ ...network, TOOLROUTER_CONFIG: config, LOG_LEVEL: 'info' }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(child);
    await listening(child);
    return { child, url: `http://127.0.0.1:${port}` };
  }

  async function stop(child: ChildProcess): Promise<void> {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }

  test('the server behind the wrapper gets the CA and proxy variables; a failing one shows its stderr; SIGTERM ends the whole tree', async () => {
    const pidFile = path.join(dir, 'wrapped.pid');
    const { child, url } = await serveWith(
      {
        wrapped: {
          command: wrapper,
          args: [process.execPath, '--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/stdio-server.ts')],
          cwd: REPO_ROOT,
          // The server's own env wins over what it inherits; the server keeps running after its client has gone.
          env: { WRAPPER_PID_FILE: pidFile, FIXTURE_OUTLIVE_CLIENT: '1', NO_PROXY: 'only.example' },
        },
        failing: { command: 'sh', args: ['-c', 'echo "npm error code SELF_SIGNED_CERT_IN_CHAIN" >&2; exit 1'] },
      },
      120_000,
    );
    type Servers = { servers: { name: string; state: string; lastError?: string }[] };
    const servers = await eventually(
      async () => ((await (await fetch(`${url}/v1/mcp/servers`)).json()) as Servers).servers,
      (list) => list.find((server) => server.name === 'wrapped')?.state === 'connected' && list.some((server) => server.name === 'failing' && server.lastError !== undefined),
      180_000,
    );
    assert.match(servers.find((server) => server.name === 'failing')!.lastError!, /stderr: .*SELF_SIGNED_CERT_IN_CHAIN/);
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const response = await fetch(`${url}/mcp-rest/tools/call`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, arguments: args }) });
      assert.equal(response.status, 200);
      return ((await response.json()) as { content: { text: string }[] }).content[0]!.text;
    };
    for (const [name, value] of Object.entries(network)) assert.equal(await call('wrapped__env', { name }), name === 'NO_PROXY' ? 'only.example' : value, name);
    const server = Number(await call('wrapped__pid'));
    const shell = readPid(pidFile)!;
    started.push(server, shell);
    assert.ok(running(server) && running(shell));
    await stop(child);
    assert.equal(running(server), false, 'the node server the wrapper started is gone with toolrouter');
    assert.equal(running(shell), false, 'the wrapper is gone with toolrouter');
  });

  test('SIGTERM while a wrapper is still in its first connect ends it and its child', async () => {
    const pidFile = path.join(dir, 'sleeper.pid');
    const { child } = await serveWith({ sleeper: { command: wrapper, args: ['sleep', '1000'], env: { WRAPPER_PID_FILE: pidFile } } }, 600_000);
    const shell = await eventually(() => readPid(pidFile), (pid) => pid !== undefined && childrenOf(pid).length > 0, 60_000);
    const [sleep] = childrenOf(shell!);
    started.push(shell!, sleep!);
    await stop(child);
    assert.equal(running(sleep!), false, 'the wrapper’s child is gone with toolrouter');
    assert.equal(running(shell!), false, 'the wrapper is gone with toolrouter');
  });
});
