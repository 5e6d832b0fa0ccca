import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import YAML from 'yaml';
import { checkConfig, MASK } from '../src/config/check.js';
import { ConfigError, loadConfig, PROJECT_ROOT } from '../src/config/config.js';
import { BIN } from './helpers/ops-processes.js';

const EXAMPLE = path.join(PROJECT_ROOT, 'config.example.yaml');

function configFile(text: string, name = 'toolrouter.yaml'): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'toolrouter-ops-')), name);
  writeFileSync(file, text);
  return file;
}

/** `node bin/toolrouter.js <args>` to the end, without the developer's own settings leaking in. */
async function cli(args: string[], env: Record<string, string> = {}, cwd = PROJECT_ROOT): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base = { ...process.env };
  for (const name of ['TOOLROUTER_CONFIG', 'REDIS_URL', 'ADMIN_KEY', 'PORT', 'HOST', 'UPSTREAM_LLM_URL', 'UPSTREAM_LLM_KEY', 'WORKER_METRICS_PORT', 'LOG_LEVEL']) delete base[name];
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

const SECRETS = {
  adminKey: 'admin-key-0123456789abcdef',
  upstreamKey: 'sk-upstream-secret',
  redisPassword: 'redis-pa55word',
  token: 'ghp_header_token',
  env: 'env-secret-value',
};

const SECRET_CONFIG = `
adminKey: ${SECRETS.adminKey}
redisUrl: redis://default:${SECRETS.redisPassword}@127.0.0.1:6379/0
chat: { upstreamKey: ${SECRETS.upstreamKey}, k: 7 }
mcp:
  servers:
    github: { url: "https://example.com/mcp", headers: { Authorization: "Bearer ${SECRETS.token}" } }
    files: { command: npx, args: [server-filesystem], env: { API_TOKEN: ${SECRETS.env} } }
`;

describe('config.example.yaml', () => {
  it('is a valid configuration covering every documented part', () => {
    const config = loadConfig({ TOOLROUTER_CONFIG: EXAMPLE });
    assert.equal(config.search.mode, 'hybrid');
    assert.deepEqual(config.search.weights, { bm25: 0.55, vector: 0.45 });
    assert.equal(config.search.fusion, 'weighted');
    assert.equal(config.search.maxTopK, 50);
    assert.ok(config.search.pinned.includes('restart_service'));
    assert.deepEqual(Object.keys(config.catalog.sources), ['ops']);
    assert.equal(config.catalog.sources.ops!.length, 2);
    assert.deepEqual(Object.keys(config.mcp.servers).sort(), ['files', 'github']);
    assert.ok(config.mcp.transforms.github__create_issue);
    assert.equal(config.embedding.model, 'toolrouter/glove-100d-sif');
    assert.equal(config.chat.k, 10);
    assert.equal(config.worker.metricsPort, 9464);
    assert.equal(config.shutdownTimeoutMs, 25_000);
  });

  it('has no setting the schema does not know (no typo is silently ignored)', () => {
    assert.deepEqual(checkConfig({ TOOLROUTER_CONFIG: EXAMPLE }).unknown, []);
  });
});

describe('config loading', () => {
  it('lets environment variables win over the file', () => {
    const config = loadConfig({ TOOLROUTER_CONFIG: EXAMPLE, PORT: '9999', WORKER_METRICS_PORT: '9100', LOG_LEVEL: 'warn' });
    assert.equal(config.port, 9999);
    assert.equal(config.worker.metricsPort, 9100);
    assert.equal(config.logLevel, 'warn');
    assert.equal(config.chat.k, 10, 'what the environment does not set still comes from the file');
  });

  it('names every problem of an invalid file, each with its path', () => {
    const file = configFile(`
port: 70000
search: { mode: fuzzy, topK: 0, weights: { bm25: 0, vector: 0 } }
mcp: { servers: { "bad name": { command: x }, half: { cmd: x } } }
worker: { metricsPort: -1 }
shutdownTimeoutMs: soon
`);
    assert.throws(
      () => loadConfig({ TOOLROUTER_CONFIG: file }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        const paths = error.problems.map((problem) => problem.split(':')[0]);
        for (const expected of ['port', 'search.mode', 'search.topK', 'search.weights', 'worker.metricsPort', 'shutdownTimeoutMs', 'mcp.servers.half']) {
          assert.ok(paths.includes(expected), `${expected} is reported: ${JSON.stringify(error.problems)}`);
        }
        assert.ok(error.problems.some((problem) => problem.includes('bad name')), JSON.stringify(error.problems));
        return true;
      },
    );
  });

  it('reports unreadable and malformed files by name', () => {
    assert.throws(() => loadConfig({ TOOLROUTER_CONFIG: '/nonexistent/toolrouter.yaml' }), /cannot read config file \/nonexistent\/toolrouter\.yaml/);
    const broken = configFile('search: { mode: hybrid\nport: [1,\n');
    assert.throws(() => loadConfig({ TOOLROUTER_CONFIG: broken }), (error: unknown) => error instanceof ConfigError && error.message.includes(broken));
    assert.throws(() => loadConfig({ TOOLROUTER_CONFIG: configFile('- a\n- b\n') }), /top level must be a mapping/);
  });
});

describe('toolrouter config check', () => {
  it('prints the effective configuration with every secret masked', async () => {
    const file = configFile(SECRET_CONFIG);
    const { code, stdout, stderr } = await cli(['--config', file, 'config', 'check', '--format', 'json'], { PORT: '8181' });
    assert.equal(code, 0, stderr);
    for (const secret of Object.values(SECRETS)) {
      assert.ok(!stdout.includes(secret) && !stderr.includes(secret), `${secret} is not printed`);
    }
    const printed = JSON.parse(stdout) as any;
    assert.equal(printed.adminKey, MASK);
    assert.equal(printed.chat.upstreamKey, MASK);
    assert.equal(printed.redisUrl, `redis://default:${MASK}@127.0.0.1:6379/0`);
    assert.deepEqual(printed.mcp.servers.github.headers, { Authorization: MASK });
    assert.deepEqual(printed.mcp.servers.files.env, { API_TOKEN: MASK });
    assert.equal(printed.mcp.servers.github.url, 'https://example.com/mcp', 'what is not secret is shown');
    assert.equal(printed.chat.k, 7);
    assert.equal(printed.port, 8181, 'the environment is applied: the effective configuration');
    assert.equal(printed.search.mode, 'hybrid', 'defaults are filled in');
  });

  it('takes the file from TOOLROUTER_CONFIG the same as from --config, and prints YAML by default', async () => {
    const file = configFile('chat: { k: 13 }\nsearch: { fusion: rrf }\n');
    const viaEnv = await cli(['config', 'check'], { TOOLROUTER_CONFIG: file });
    const viaFlag = await cli(['config', 'check', '--config', path.basename(file)], {}, path.dirname(file));
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
    assert.equal(viaFlag.code, 0, viaFlag.stderr);
    assert.equal(viaFlag.stdout, viaEnv.stdout, 'a relative --config path is resolved against the working directory');
    const printed = YAML.parse(viaEnv.stdout) as any;
    assert.equal(printed.chat.k, 13);
    assert.equal(printed.search.fusion, 'rrf');
  });

  it('exits nonzero listing every problem, one per line', async () => {
    const file = configFile('port: -1\nsearch: { mode: fuzzy }\nadminKey: short\n');
    const { code, stdout, stderr } = await cli(['--config', file, 'config', 'check']);
    assert.equal(code, 2);
    assert.equal(stdout, '', 'nothing is printed as if it were valid');
    assert.match(stderr, /configuration is invalid .*3 problem\(s\)/);
    assert.match(stderr, /^ {2}- port: /m);
    assert.match(stderr, /^ {2}- search\.mode: /m);
    assert.match(stderr, /^ {2}- adminKey: adminKey must be at least 16 characters$/m);
    assert.ok(!stderr.includes('short\n'), 'the rejected secret itself is not echoed');
  });

  it('warns about settings the schema does not know', async () => {
    const file = configFile('serach: { mode: bm25 }\nsearch: { topk: 3 }\n');
    const { code, stderr } = await cli(['--config', file, 'config', 'check']);
    assert.equal(code, 0);
    assert.match(stderr, /unknown setting serach/);
    assert.match(stderr, /unknown setting search\.topk/);
  });

  it('fails `serve` on the same invalid file before listening', async () => {
    const file = configFile('search: { mode: fuzzy }\n');
    const { code, stderr } = await cli(['--config', file, 'serve']);
    assert.equal(code, 1);
    assert.match(stderr, /search\.mode/);
  });
});

describe('deployment files', () => {
  const pkg = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> };
  const compose = YAML.parse(readFileSync(path.join(PROJECT_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as any;
  const dockerfile = readFileSync(path.join(PROJECT_ROOT, 'Dockerfile'), 'utf8');

  it('docker-compose.yml has redis with AOF, a scalable api and a worker running CLI commands that exist', async () => {
    assert.deepEqual(Object.keys(compose.services).sort(), ['api', 'redis', 'worker']);
    const { redis, api, worker } = compose.services;
    assert.ok(redis.command.join(' ').includes('--appendonly yes'));
    assert.ok(redis.volumes.some((volume: string) => volume.endsWith(':/data')), 'the AOF lives on a volume');
    assert.equal(api.container_name, undefined, 'a fixed container name would prevent --scale');
    for (const mapping of api.ports as string[]) {
      assert.match(mapping, /-.*:8080$/, 'a host port range, so replicas do not clash');
    }
    for (const service of [api, worker]) {
      assert.equal(service.environment.REDIS_URL, 'redis://redis:6379');
      assert.ok(service.environment.ADMIN_KEY, 'an API on all interfaces needs an admin key');
      assert.equal(service.depends_on.redis.condition, 'service_healthy');
    }
    assert.equal(api.environment.HOST, '0.0.0.0');
    assert.deepEqual(api.command, ['serve']);
    assert.deepEqual(worker.command, ['worker']);
    assert.ok(worker.environment.WORKER_METRICS_PORT);
    assert.match(worker.healthcheck.test.join(' '), new RegExp(`${worker.environment.WORKER_METRICS_PORT}/health`));
    // The commands are the CLI's: the image's entrypoint is the package's bin.
    const help = await cli(['--help']);
    for (const command of [api.command[0], worker.command[0]]) assert.match(help.stdout, new RegExp(`^ {2}${command}\\b`, 'm'));
  });

  it('Dockerfile builds the offline model at build time, runs the package bin as a non-root user, with a health check', () => {
    assert.match(dockerfile, /^FROM node:20-bookworm-slim AS build$/m);
    assert.match(dockerfile, /^RUN npm ci\b/m);
    for (const [, script] of dockerfile.matchAll(/npm run ([\w:-]+)/g)) assert.ok(pkg.scripts[script!], `npm run ${script} exists in package.json`);
    assert.match(dockerfile, /^RUN npm run models:build$/m);
    assert.match(dockerfile, /^USER node$/m);
    assert.match(dockerfile, /^HEALTHCHECK .*\n.*\/health/m);
    const entrypoint = JSON.parse(/^ENTRYPOINT (.*)$/m.exec(dockerfile)![1]!) as string[];
    assert.deepEqual(entrypoint, ['node', pkg.bin.toolrouter]);
    const ignored = readFileSync(path.join(PROJECT_ROOT, '.dockerignore'), 'utf8').split('\n');
    assert.ok(ignored.includes('node_modules') && ignored.includes('models/*/'), 'host builds stay out of the image');
  });
});
