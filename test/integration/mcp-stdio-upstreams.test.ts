/**
 * stdio upstreams as they are launched in practice, through a wrapper that starts the real server as its child (npx,
 * uvx, sh -c): the server gets the network variables it needs beside the SDK's minimal environment, everything the
 * wrapper started ends when toolrouter closes the connection (also while it is still connecting), and a server that
 * fails to start says why in its status, a timeout included.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Catalog } from '../../src/catalog/catalog.js';
import { UpstreamManager } from '../../src/mcp/upstream/manager.js';
import type { UpstreamServerConfig } from '../../src/mcp/upstream/types.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { childrenOf, groupOf, npxStyleWrapper, running } from '../helpers/process-tree.js';

const NETWORK = {
  HTTP_PROXY: 'http://127.0.0.1:3128',
  HTTPS_PROXY: 'http://127.0.0.1:3129',
  http_proxy: 'http://127.0.0.1:3130',
  https_proxy: 'http://127.0.0.1:3131',
  NO_PROXY: 'localhost,127.0.0.1',
  no_proxy: '.internal',
  NODE_EXTRA_CA_CERTS: '/etc/toolrouter-test/extra-ca.pem',
  SSL_CERT_FILE: '/etc/toolrouter-test/ca-bundle.pem',
  SSL_CERT_DIR: '/etc/toolrouter-test/certs',
};

function manager(servers: Record<string, UpstreamServerConfig>, connectTimeoutMs: number): UpstreamManager {
  return new UpstreamManager(new Catalog({ separator: '__' }), {
    servers,
    separator: '__',
    reconnect: { initialMs: 60_000, maxMs: 60_000 },
    connectTimeoutMs,
    pingIntervalMs: 0,
    log: pino({ level: 'silent' }),
  });
}

const pidFile = () => path.join(mkdtempSync(path.join(tmpdir(), 'toolrouter-pid-')), 'wrapper.pid');
const readPid = (file: string) => (existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) || undefined : undefined);

describe('stdio upstreams launched through a wrapper', { timeout: 180_000 }, () => {
  const wrapper = npxStyleWrapper();
  const saved = new Map<string, string | undefined>();
  const managers: UpstreamManager[] = [];
  after(async () => {
    for (const upstreams of managers) await upstreams.close();
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it('the server gets the proxy and CA variables beside the defaults, its own env wins, and nothing else of ours', async () => {
    for (const [name, value] of Object.entries({ ...NETWORK, TOOLROUTER_TEST_SECRET: 'not-for-upstreams' })) {
      saved.set(name, process.env[name]);
      process.env[name] = value;
    }
    const fixture = stdioFixtureServer();
    const upstreams = manager({ wrapped: { command: wrapper, args: [fixture.command, ...fixture.args], cwd: fixture.cwd, env: { no_proxy: 'only.example' } } }, 120_000);
    managers.push(upstreams);
    upstreams.start();
    await upstreams.settled();
    assert.equal(upstreams.statusOf('wrapped')?.state, 'connected', upstreams.statusOf('wrapped')?.lastError ?? '');
    const seen = async (name: string) => textOf(await upstreams.callTool('wrapped__env', { name }, { timeoutMs: 30_000 }));
    for (const [name, value] of Object.entries(NETWORK)) assert.equal(await seen(name), name === 'no_proxy' ? 'only.example' : value, name);
    assert.equal(await seen('TOOLROUTER_TEST_SECRET'), '');
    assert.equal(await seen('PATH'), process.env.PATH);
  });

  it('closing ends the wrapper and the server it started, one that outlives its client included', async () => {
    const file = pidFile();
    const fixture = stdioFixtureServer({ WRAPPER_PID_FILE: file, FIXTURE_OUTLIVE_CLIENT: '1' });
    const upstreams = manager({ wrapped: { command: wrapper, args: [fixture.command, ...fixture.args], cwd: fixture.cwd, env: fixture.env } }, 120_000);
    managers.push(upstreams);
    upstreams.start();
    await upstreams.settled();
    assert.equal(upstreams.statusOf('wrapped')?.state, 'connected', upstreams.statusOf('wrapped')?.lastError ?? '');
    const server = Number(textOf(await upstreams.callTool('wrapped__pid', {}, { timeoutMs: 30_000 })));
    const shell = readPid(file)!;
    assert.equal(groupOf(server), groupOf(shell), 'the server runs in the wrapper’s group');
    assert.ok(running(server) && running(shell));
    await upstreams.close();
    assert.equal(running(server), false, 'the server the wrapper started is gone');
    assert.equal(running(shell), false, 'the wrapper is gone');
  });

  it('closing while the first connect is still waiting ends what was started (a wrapper that never answers)', async () => {
    const file = pidFile();
    const upstreams = manager({ sleeper: { command: wrapper, args: ['sleep', '1000'], env: { WRAPPER_PID_FILE: file } } }, 600_000);
    managers.push(upstreams);
    upstreams.start();
    const shell = await waitFor('the wrapper to start', () => readPid(file), 60_000);
    const [sleep] = await waitFor('the wrapper’s child', () => (childrenOf(shell).length > 0 ? childrenOf(shell) : undefined), 60_000);
    assert.equal(upstreams.statusOf('sleeper')?.state, 'connecting');
    await upstreams.close();
    assert.equal(running(sleep!), false, 'the wrapper’s child is gone');
    assert.equal(running(shell), false, 'the wrapper is gone');
  });

  it('a server that does not answer in time: the status names the timeout, once, and the lines it wrote to stderr', async () => {
    const upstreams = manager(
      {
        stuck: { command: wrapper, args: ['sh', '-c', 'echo "npm error code SELF_SIGNED_CERT_IN_CHAIN" >&2; sleep 1000'] },
        // As test/fixtures/mcp/failing-server.ts, without tsx's start-up within the short timeout.
        failing: { command: 'sh', args: ['-c', 'echo "missing API_TOKEN env var" >&2; exit 1'] },
      },
      1_500,
    );
    managers.push(upstreams);
    upstreams.start();
    await upstreams.settled();
    const stuck = upstreams.statusOf('stuck')!;
    assert.equal(stuck.state, 'down');
    // One deadline for the revision probe and initialize together: the message says how long, and where to set it.
    assert.match(stuck.lastError ?? '', /^connecting timed out after 1500 ms \(mcp\.connectTimeoutMs\)/);
    assert.match(stuck.lastError ?? '', /stderr: .*SELF_SIGNED_CERT_IN_CHAIN/);
    assert.match(upstreams.statusOf('failing')?.lastError ?? '', /stderr: .*missing API_TOKEN env var/);
  });
});
