import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import YAML from 'yaml';
import { REPO_ROOT } from '../helpers/paths.js';
import { collectJsonLines, eventually } from '../helpers/processes.js';

const run = promisify(execFile);

/**
 * The package as a user gets it: `npm pack`, then the tarball installed into an empty project with production
 * dependencies only (no tsx, no TypeScript), from the local npm cache (`--prefer-offline`; the registry is the only
 * network), and its `toolrouter` bin run from there.
 */
describe('packed package, installed with production dependencies only', { timeout: 30 * 60_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'toolrouter-pack-'));
  const app = path.join(work, 'app');
  const bin = path.join(app, 'node_modules/.bin/toolrouter');
  const installed = path.join(app, 'node_modules/toolrouter');
  let files: string[] = [];
  let server: ChildProcess | undefined;

  /** The installed bin, with none of the developer's settings. */
  const toolrouter = (args: string[], env: Record<string, string> = {}) => {
    const base = { ...process.env };
    for (const name of ['TOOLROUTER_CONFIG', 'REDIS_URL', 'ADMIN_KEY', 'PORT', 'HOST', 'MODELS_DIR', 'LOG_LEVEL']) delete base[name];
    return { cwd: app, env: { ...base, ...env } };
  };

  const timings: string[] = [];

  before(async () => {
    let started = performance.now();
    // prepack builds dist/ (incremental tsc), so the tarball holds the code as it is now.
    await run('npm', ['pack', '--pack-destination', work, '--silent'], { cwd: REPO_ROOT, maxBuffer: 64 << 20 });
    const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'))!;
    files = (await run('tar', ['-tzf', path.join(work, tarball)], { maxBuffer: 64 << 20 })).stdout.trim().split('\n').map((name) => name.replace(/^package\//, ''));
    timings.push(`npm pack: ${((performance.now() - started) / 1000).toFixed(1)} s, ${files.length} files`);

    mkdirSync(app);
    // sharp: @xenova/transformers@2 wants sharp 0.32, whose install downloads libvips from GitHub; 0.33 ships it as npm
    // packages. A dependency's own overrides do not apply, so an offline consumer sets it (README: "Install").
    writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'toolrouter-consumer', private: true, overrides: { sharp: '0.33.5' } }));
    // re2 compiles for 10+ minutes on a loaded machine when its prebuilt binary cannot be fetched; its installer takes
    // the binary from a mirror directory instead (RE2_DOWNLOAD_MIRROR), here the one built for this checkout.
    const mirror = path.join(work, 're2-mirror');
    mkdirSync(mirror);
    copyFileSync(path.join(REPO_ROOT, 'node_modules/re2/build/Release/re2.node'), path.join(mirror, `${process.platform}-${process.arch}-${process.versions.modules}`));
    started = performance.now();
    await run('npm', ['install', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', '--silent', path.join(work, tarball)], {
      cwd: app,
      env: { ...process.env, RE2_DOWNLOAD_MIRROR: mirror, RE2_DOWNLOAD_SKIP_PATH: '1', RE2_DOWNLOAD_SKIP_VER: '1' },
      maxBuffer: 64 << 20,
    });
    timings.push(`npm install --omit=dev of the tarball: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  after(async () => {
    if (server && server.exitCode === null && server.signalCode === null) {
      server.kill('SIGKILL');
      await once(server, 'exit');
    }
    rmSync(work, { recursive: true, force: true });
  });

  it('holds the compiled code, declarations, bin and console, and no sources, tests, fixtures or benchmarks', (t) => {
    for (const timing of timings) t.diagnostic(timing);
    for (const file of ['package.json', 'README.md', 'bin/toolrouter.js', 'dist/src/cli.js', 'dist/src/index.js', 'dist/src/index.d.ts', 'dist/workers/indexer.js', 'dist/src/console/index.html']) {
      assert.ok(files.includes(file), `${file} is packed`);
    }
    const unexpected = files.filter((file) => /^(test|bench|src|models|docs|\.ci)\//.test(file) || /fixtures|\.map$|(?<!\.d)\.ts$/.test(file));
    assert.deepEqual(unexpected, []);
  });

  it('installs without dev dependencies', () => {
    assert.ok(existsSync(path.join(installed, 'dist/src/cli.js')));
    for (const dev of ['tsx', 'typescript', 'eslint', 'playwright-core']) {
      assert.equal(existsSync(path.join(app, 'node_modules', dev)), false, `${dev} is not installed`);
    }
  });

  it('answers `toolrouter --help` and `toolrouter config check`, with data paths inside the installed package', async () => {
    const help = await run(bin, ['--help'], toolrouter([]));
    assert.match(help.stdout, /^ {2}serve\b/m);
    assert.match(help.stdout, /^ {2}worker\b/m);
    const check = await run(bin, ['config', 'check'], toolrouter([]));
    const config = YAML.parse(check.stdout) as { embedding: { modelsDir: string }; port: number };
    assert.equal(config.port, 8080);
    assert.equal(config.embedding.modelsDir, path.join(installed, 'models'), 'the default models dir is the package\'s own, not the working directory');
  });

  it('runs `toolrouter serve`: /health, the console, and a search over a catalog it indexed', async () => {
    // The offline model this checkout built (MODELS_DIR), so the test does not spend a minute building another.
    const options = toolrouter([], { PORT: '0', LOG_LEVEL: 'info', MODELS_DIR: path.join(REPO_ROOT, 'models') });
    server = spawn(bin, ['serve'], { ...options, stdio: ['ignore', 'ignore', 'pipe'] });
    const logs: Record<string, unknown>[] = [];
    collectJsonLines(server.stderr!, logs, () => {});
    const listening = await eventually(
      async () => logs.find((line) => line.msg === 'toolrouter listening'),
      (line) => line !== undefined || server!.exitCode !== null,
      120_000,
    );
    assert.ok(listening, `serve did not start: ${JSON.stringify(logs.slice(-5))}`);
    const url = `http://127.0.0.1:${String(listening.port)}`;
    assert.equal((await fetch(`${url}/health`)).status, 200);
    const page = await fetch(`${url}/console/`);
    assert.equal(page.status, 200, 'the console files were packed and are found beside the compiled code');
    const tools = [
      { name: 'send_email', description: 'Send an email message to a recipient', inputSchema: { type: 'object', properties: { to: { type: 'string' } } } },
      { name: 'get_weather', description: 'Current weather forecast for a city', inputSchema: { type: 'object', properties: { city: { type: 'string' } } } },
      { name: 'create_invoice', description: 'Create a customer invoice for billing', inputSchema: { type: 'object', properties: {} } },
    ];
    const put = await fetch(`${url}/v1/catalog/sources/demo`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tools }) });
    assert.equal(put.status, 200);
    const { catalogHash } = (await put.json()) as { catalogHash: string };
    await eventually(
      async () => (await (await fetch(`${url}/v1/index/status`)).json()) as { state: string; indexedHash: string },
      (status) => status.state === 'ready' && status.indexedHash === catalogHash,
      120_000,
    );
    const search = await fetch(`${url}/v1/tools/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'what is the forecast in Paris', top_k: 2 }) });
    assert.equal(search.status, 200);
    const body = (await search.json()) as { results: { name: string }[] };
    assert.equal(body.results[0]?.name, 'get_weather');
  });
});
