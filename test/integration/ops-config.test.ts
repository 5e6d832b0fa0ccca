import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import YAML from 'yaml';
import { inspectConfig, MASK } from '../../src/config/check.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { staticSourceEntry } from '../../src/catalog/settings.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { CLI } from '../helpers/ops-processes.js';

const EXAMPLE = path.join(REPO_ROOT, 'config.example.yaml');

function configFile(text: string, name = 'toolrouter.yaml'): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'toolrouter-ops-')), name);
  writeFileSync(file, text);
  return file;
}

/** `toolrouter <args>` to the end, without the developer's own settings leaking in. */
async function cli(args: string[], env: Record<string, string> = {}, cwd = REPO_ROOT): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base = { ...process.env };
  for (const name of ['TOOLROUTER_CONFIG', 'REDIS_URL', 'ADMIN_KEY', 'PORT', 'HOST', 'UPSTREAM_LLM_URL', 'UPSTREAM_LLM_KEY', 'WORKER_METRICS_PORT', 'LOG_LEVEL']) delete base[name];
  const child = spawn(process.execPath, [...CLI, ...args], { cwd, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
    assert.deepEqual(config.search.weights, { bm25: 0.6, vector: 0.4 });
    assert.equal(config.search.fusion, 'weighted');
    assert.equal(config.search.maxTopK, 50);
    assert.ok(config.search.pinned.includes('restart_service'));
    assert.deepEqual(Object.keys(config.catalog.sources), ['ops']);
    assert.equal(staticSourceEntry(config.catalog.sources.ops!).tools.length, 2);
    assert.deepEqual(Object.keys(config.mcp.servers).sort(), ['files', 'github']);
    assert.ok(config.mcp.transforms.github__create_issue);
    assert.equal(config.embedding.model, 'toolrouter/glove-100d-sif-150k');
    assert.equal(config.chat.k, 10);
    assert.equal(config.worker.metricsPort, 9464);
    assert.equal(config.shutdownTimeoutMs, 25_000);
  });

  it('has no setting the schema does not know (no typo is silently ignored)', () => {
    assert.deepEqual(inspectConfig({ TOOLROUTER_CONFIG: EXAMPLE }).problems, []);
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

  it('makes any unknown setting, at any depth, an error naming the closest known setting', () => {
    const file = configFile(`
mcpServers: { files: { command: x } }
mcp: { serverz: { a: { command: x } } }
search: { topk: 3, weights: { vectr: 0.5 } }
surch: {}
queue: { prefix: tr }
embedding: { batchsize: 8 }
zzzzzzzz: 1
`);
    assert.throws(
      () => loadConfig({ TOOLROUTER_CONFIG: file }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.deepEqual(error.problems.sort(), [
          'embedding.batchsize: unknown setting; did you mean `embedding.batchSize`?',
          'mcp.serverz: unknown setting; did you mean `mcp.servers`?',
          'mcpServers: unknown setting; did you mean `mcp.servers`, or import the file with mcp.import / --mcp-config?',
          'search.topk: unknown setting; did you mean `search.topK`?',
          'search.weights.vectr: unknown setting; did you mean `search.weights.vector`?',
          'surch: unknown setting; did you mean `search`?',
          'zzzzzzzz: unknown setting',
        ]);
        return true;
      },
    );
    // The same rule for overrides (tests, the CLI) as for the file.
    assert.throws(() => loadConfig({}, { security: { allowedHost: ['x'] } }), /security\.allowedHost: unknown setting; did you mean `security\.allowedHosts`\?/);
  });

  it('names the setting, the type it takes and the value given for a YAML value of the wrong type', () => {
    const file = configFile(`
port: eighty
mcp: { pageSize: ten, search: maybe }
security: { trustProxy: [1], redisTimeoutMs: "5" }
adminKey: 1234567890123456789
`);
    assert.throws(
      () => loadConfig({ TOOLROUTER_CONFIG: file }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        const problems = error.problems;
        assert.ok(problems.includes('port: must be a number, got "eighty" (a string)'), JSON.stringify(problems));
        assert.ok(problems.includes('mcp.pageSize: must be a number, got "ten" (a string)'), JSON.stringify(problems));
        assert.ok(problems.includes('mcp.search: must be "auto", true or false'), JSON.stringify(problems));
        assert.ok(problems.includes('security.trustProxy: must be true or false or a number or a string, got [1] (a list)'), JSON.stringify(problems));
        assert.ok(problems.includes('security.redisTimeoutMs: must be a number, got "5" (a string)'), JSON.stringify(problems));
        // A secret given with the wrong type is named, not repeated.
        assert.ok(problems.includes('adminKey: must be a string, got a number'), JSON.stringify(problems));
        assert.ok(!problems.some((problem) => problem.includes('NaN')), JSON.stringify(problems));
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
    assert.equal(printed.redis.url, `redis://default:${MASK}@127.0.0.1:6379/0`, 'the older top-level redisUrl is read as redis.url');
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

  it('reports an invalid policy naming file, line and Cedar\'s message, and serve refuses to start on it', async () => {
    const policies = configFile('@id("ok") permit (principal, action, resource);\n\npermit (principal, action, resource)\n  when { resource.nme == "x" };\n', 'policies.cedar');
    const file = configFile(`policy: { files: [${JSON.stringify(policies)}] }\n`);
    const { code, stdout, stderr } = await cli(['--config', file, 'config', 'check']);
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.match(stderr, /^ {2}- policy\.files: .*policies\.cedar:4: for policy `policy1`, attribute `nme` on entity type `Tool` not found; did you mean `name`\?$/m);
    const serve = await cli(['--config', file, 'serve'], { PORT: '0', MODELS_DIR: path.join(REPO_ROOT, 'models') });
    assert.notEqual(serve.code, 0);
    assert.match(serve.stderr, /policies\.cedar:4: /);
    // The schema policies are checked against, with the configured claims.
    const schema = await cli(['--config', configFile('policy: { claims: [department] }\n'), 'policy', 'schema']);
    assert.equal(schema.code, 0);
    assert.match(schema.stdout, /entity Caller in \[Group\]/);
    assert.match(schema.stdout, /department\?: Set<String>/);
    assert.match(schema.stdout, /action call_tool appliesTo/);
  });

  it('refuses settings the schema does not know', async () => {
    const file = configFile('serach: { mode: bm25 }\nsearch: { topk: 3 }\n');
    const { code, stderr } = await cli(['--config', file, 'config', 'check']);
    assert.equal(code, 2);
    assert.match(stderr, /^ {2}- serach: unknown setting; did you mean `search`\?$/m);
    assert.match(stderr, /^ {2}- search\.topk: unknown setting; did you mean `search\.topK`\?$/m);
  });

  it('fails `serve` on the same invalid file before listening: one line, exit code 2', async () => {
    const file = configFile('search: { mode: fuzzy }\n');
    const { code, stdout, stderr } = await cli(['--config', file, 'serve']);
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.match(stderr, /^toolrouter: invalid configuration \(.*toolrouter\.yaml and the environment\): search\.mode: /);
    assert.equal(stderr.trim().split('\n').length, 1, stderr);
  });

  it('lists unknown settings with the other problems', async () => {
    const file = configFile('mcp: { serverz: { x: { command: x } } }\nport: -1\n');
    const { code, stderr } = await cli(['--config', file, 'config', 'check']);
    assert.equal(code, 2);
    assert.match(stderr, /^ {2}- mcp\.serverz: unknown setting; did you mean `mcp\.servers`\?$/m);
    assert.match(stderr, /^ {2}- port: /m);
  });

  it('still accepts --strict-config (unknown settings are errors with or without it)', async () => {
    const file = configFile('search: { topk: 3 }\n');
    for (const args of [['--strict-config', '--config', file, 'config', 'check'], ['--config', file, 'config', 'check']]) {
      const { code, stdout, stderr } = await cli(args);
      assert.equal(code, 2);
      assert.equal(stdout, '');
      assert.match(stderr, /^ {2}- search\.topk: unknown setting; did you mean `search\.topK`\?$/m);
    }
  });

  it('merges a partial search.weights over the defaults, as the settings API does', async () => {
    const config = loadConfig({ TOOLROUTER_CONFIG: configFile('search: { weights: { bm25: 0.7 } }\n') });
    assert.deepEqual(config.search.weights, { bm25: 0.7, vector: 0.4 });
    assert.deepEqual(loadConfig({ TOOLROUTER_CONFIG: configFile('search: { weights: { vector: 0.2 } }\n') }).search.weights, { bm25: 0.6, vector: 0.2 });
    assert.throws(() => loadConfig({ TOOLROUTER_CONFIG: configFile('search: { weights: { bm25: 0, vector: 0 } }\n') }), /search\.weights: at least one of bm25 and vector must be positive/);
  });
});

describe('toolrouter start-up errors', () => {
  /** One line on stderr naming the problem, exit code 2, no stack trace and no JSON log. */
  const assertOneLine = (result: { code: number | null; stdout: string; stderr: string }, pattern: RegExp) => {
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.stdout, '');
    const lines = result.stderr.trim().split('\n');
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0]!, pattern);
    assert.doesNotMatch(result.stderr, /\n\s+at |"level"/);
  };

  it('names a bad PORT with the value given', async () => {
    assertOneLine(await cli(['serve'], { PORT: 'eighty' }), /^toolrouter: invalid configuration \(environment\): PORT must be a port number \(0-65535\), got "eighty"$/);
    assertOneLine(await cli(['worker'], { REDIS_URL: 'redis://127.0.0.1:1', WORKER_METRICS_PORT: '99999' }), /WORKER_METRICS_PORT must be a port number/);
  });

  it('refuses `worker` without Redis, saying what to set', async () => {
    assertOneLine(await cli(['worker']), /^toolrouter: the index worker needs Redis: set REDIS_URL/);
  });

  it('says a command is unknown instead of handing it to serve', async () => {
    const result = await cli(['frobnicate']);
    assertOneLine(result, /^error: unknown command 'frobnicate' \(commands: serve, stdio, worker, eval, calibrate, tune, config, policy, audit, models; /);
    assert.doesNotMatch((await cli(['--help'])).stdout, /^ {2}bench\b/m, 'bench is `npm run bench`, not a production command');
  });

  it('reports a failure while starting as one line: an API on all interfaces without ADMIN_KEY', async () => {
    assertOneLine(await cli(['serve'], { HOST: '0.0.0.0', PORT: '0', MODELS_DIR: path.join(REPO_ROOT, 'models') }), /^toolrouter: could not start: refusing to listen on 0\.0\.0\.0 without ADMIN_KEY/);
  });

  it('refuses to start with an unknown setting: one line naming each with the closest known one, exit code 2', async () => {
    const file = configFile('port: 0\nmcp: { serverz: { a: { command: x } } }\nmcpServers: {}\nsearch: { topk: 3 }\n');
    for (const command of ['serve', 'stdio']) {
      assertOneLine(
        await cli(['--config', file, command], { MODELS_DIR: path.join(REPO_ROOT, 'models') }),
        /^toolrouter: invalid configuration .*: mcp\.serverz: unknown setting; did you mean `mcp\.servers`\?; mcpServers: unknown setting; did you mean `mcp\.servers`, or import the file with mcp\.import \/ --mcp-config\?; search\.topk: unknown setting; did you mean `search\.topK`\?$/,
      );
    }
    assertOneLine(await cli(['--config', configFile('port: eighty\n'), 'serve']), /^toolrouter: invalid configuration .*: port: must be a number, got "eighty" \(a string\)$/);
  });
});

describe('toolrouter models build', () => {
  it('uses MODELS_DIR', async () => {
    // A complete model already there (a copy of the one the tests use) is taken as is, so this builds nothing.
    const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-models-'));
    cpSync(path.join(REPO_ROOT, 'models/toolrouter'), path.join(dir, 'toolrouter'), { recursive: true });
    const { code, stdout, stderr } = await cli(['models', 'build'], { MODELS_DIR: dir });
    assert.equal(code, 0, stderr);
    assert.equal(stdout.trim(), `offline model ready in ${path.join(dir, 'toolrouter/glove-100d-sif-150k')}`);
  });
});

describe('deployment files', () => {
  const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> };
  const compose = YAML.parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as any;
  const dockerfile = readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8');

  it('docker-compose.yml: redis with AOF, a scalable api and a worker from one image, running CLI commands that exist', async () => {
    assert.deepEqual(Object.keys(compose.services).sort(), ['api', 'haproxy', 'preflight', 'redis', 'worker']);
    const { redis, api, worker } = compose.services;
    assert.ok(redis.command.join(' ').includes('--appendonly yes'));
    assert.ok(redis.volumes.some((volume: string) => volume.endsWith(':/data')), 'the AOF lives on a volume');
    assert.equal(api.container_name, undefined, 'a fixed container name would prevent --scale');
    // Replicas bind no host port (they would clash under --scale): haproxy is the entry (test/integration/ops-haproxy.test.ts).
    assert.equal(api.ports, undefined);
    for (const service of [api, worker]) {
      assert.equal(service.environment.REDIS_URL, 'redis://redis:6379');
      assert.equal(service.depends_on.redis.condition, 'service_healthy');
    }
    // One build: the api service builds the image, the worker runs it and never pulls it.
    assert.equal(api.build, '.');
    assert.equal(worker.build, undefined);
    assert.equal(worker.image, api.image);
    assert.equal(worker.pull_policy, 'never');
    // ADMIN_KEY comes from the environment or the .env file beside the compose file; a missing one must not make
    // `docker compose ps` (or logs, down) fail in a new shell, as `${ADMIN_KEY:?}` did: the API refuses to start instead.
    const raw = readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8');
    assert.doesNotMatch(raw, /\$\{ADMIN_KEY:\?/);
    assert.match(raw, /ADMIN_KEY: \$\{ADMIN_KEY:-\}/);
    assert.match(raw, /echo "ADMIN_KEY=\$\(openssl rand -hex 24\)" > \.env/);
    assert.equal(api.environment.HOST, '0.0.0.0');
    // The models directory is a volume the service user owns (Dockerfile), shared by api and worker.
    for (const service of [api, worker]) assert.ok(service.volumes.includes('models:/app/models'));
    assert.ok('models' in compose.volumes);
    assert.deepEqual(api.command, ['serve']);
    assert.deepEqual(worker.command, ['worker']);
    assert.ok(worker.environment.WORKER_METRICS_PORT);
    // The commands are the CLI's: the image's entrypoint is the package's bin.
    const help = await cli(['--help']);
    for (const command of [api.command[0], worker.command[0]]) assert.match(help.stdout, new RegExp(`^ {2}${command}\\b`, 'm'));
  });

  it('without ADMIN_KEY the api is not started and nothing restarts: the one-shot preflight says why, once, and exits 2', async () => {
    const { preflight, api } = compose.services;
    assert.equal(api.depends_on.preflight.condition, 'service_completed_successfully');
    assert.equal(preflight.restart, 'no');
    assert.equal(preflight.image, api.image);
    assert.deepEqual(preflight.entrypoint, ['node', '-e']);
    // The command as the container runs it: compose turns $$ into $, then `node -e` under the image's environment.
    const script = (preflight.command as string[])[0]!.replaceAll('$$', '$');
    const run = async (env: Record<string, string>) => {
      const base = { ...process.env };
      delete base.ADMIN_KEY;
      const child = spawn(process.execPath, ['-e', script], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const [code] = (await once(child, 'exit')) as [number | null];
      return { code, stderr };
    };
    const missing = await run({ ADMIN_KEY: '' });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /ADMIN_KEY is not set/);
    assert.match(missing.stderr, /echo "ADMIN_KEY=\$\(openssl rand -hex 24\)" > \.env/);
    assert.deepEqual(await run({ ADMIN_KEY: 'k'.repeat(48) }), { code: 0, stderr: '' });
  });

  it('Dockerfile: build stage compiles and builds the model, runtime stage has production dependencies and dist only, non-root', () => {
    const [build, runtime] = dockerfile.split(/^FROM /m).slice(1);
    // An LTS line in support (Node 20 reached end of life in April 2026).
    assert.match(dockerfile, /^ARG NODE_IMAGE=node:24-bookworm-slim$/m);
    assert.match(`FROM ${build}`, /^FROM \$\{NODE_IMAGE\} AS build$/m);
    assert.match(build!, /^RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci\b/m);
    for (const [, script] of dockerfile.matchAll(/npm run ([\w:-]+)/g)) assert.ok(pkg.scripts[script!], `npm run ${script} exists in package.json`);
    assert.match(build!, /npm run build\b/);
    assert.match(build!, /node dist\/src\/cli\.js models build\b/);
    assert.match(build!, /npm prune --omit=dev\b/);
    // The runtime stage takes only the compiled code, the pruned node_modules and the model: no sources, no tsx.
    const copies = [...runtime!.matchAll(/^COPY (?:--\S+ )*(\S+)/gm)].map((match) => match[1]);
    assert.deepEqual(copies.sort(), ['/app/bin', '/app/dist/src', '/app/dist/workers', '/app/models/toolrouter', '/app/node_modules', '/app/package.json', 'docker/healthcheck.js']);
    assert.doesNotMatch(runtime!, /tsx|npm ci|src\/cli\.ts/);
    assert.match(runtime!, /^USER node$/m);
    // models/ (the compose volume's mount point) is the service user's, so downloaded models can be stored there.
    assert.match(runtime!, /^COPY --from=build --chown=node:node \/app\/models\/toolrouter /m);
    assert.match(runtime!, /^RUN chown node:node \.\/models$/m);
    assert.match(runtime!, /^HEALTHCHECK .*docker\/healthcheck\.js/m);
    const entrypoint = JSON.parse(/^ENTRYPOINT (.*)$/m.exec(runtime!)![1]!) as string[];
    assert.deepEqual(entrypoint, ['node', pkg.bin.toolrouter]);
    const ignored = readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8').split('\n');
    assert.ok(ignored.includes('node_modules') && ignored.includes('models/*/') && ignored.includes('dist'), 'host builds stay out of the image');
  });

  it('the image health check probes the API on PORT (the worker on WORKER_METRICS_PORT)', async () => {
    const healthcheck = readFileSync(path.join(REPO_ROOT, 'docker/healthcheck.js'), 'utf8');
    assert.match(healthcheck, /worker \? process\.env\.WORKER_METRICS_PORT : process\.env\.PORT/);
    // Here PID 1 is not `toolrouter worker`, so it probes PORT: a server answering /health, then nothing listening.
    const server = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end()).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = String((server.address() as AddressInfo).port);
    const probe = async () => {
      const child = spawn(process.execPath, [path.join(REPO_ROOT, 'docker/healthcheck.js')], { env: { ...process.env, PORT: port }, stdio: 'ignore' });
      return ((await once(child, 'exit')) as [number | null])[0];
    };
    assert.equal(await probe(), 0);
    await new Promise((resolve) => server.close(resolve));
    assert.equal(await probe(), 1);
  });
});
