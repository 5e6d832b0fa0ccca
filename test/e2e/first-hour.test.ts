import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../helpers/paths.js';
import { collectJsonLines, eventually } from '../helpers/processes.js';
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
    assert.equal((await fetch(`http://127.0.0.1:${port}/console/`)).status, 200);
    // The redirect is the root only: the API beside it still needs the key.
    assert.equal((await fetch(`http://127.0.0.1:${port}/v1/mcp/servers`)).status, 401);
    child.kill('SIGTERM');
    await once(child, 'exit');
  });

  test('serve refuses a port that is not one, before starting anything', async () => {
    const failed = await run(CLI[0]!, [...CLI.slice(1), 'serve', '--port', '70000'], { env: cleanEnv() }).then(
      () => assert.fail('serve accepted port 70000'),
      (error: { code: number; stderr: string }) => error,
    );
    assert.equal(failed.code, 2);
    assert.match(failed.stderr, /--port.*must be a port number/);
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
