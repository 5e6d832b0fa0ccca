/**
 * Docs that cannot drift: every fenced `yaml` block of README.md and docs/ is a configuration the schema accepts (a
 * block marked `<!-- yaml: partial -->` is deliberately incomplete and skipped); the committed configuration reference
 * and JSON Schema are what `npm run docs:config` writes now; `toolrouter config schema`, `--version` and `config check`
 * answer as the docs say; and the command blocks marked `<!-- docs-test: run -->` run as written against a started
 * router (only its address and the `-sS --fail-with-body` that make curl report an HTTP error are the test's); and no
 * table cell runs past 200 characters (long text goes in prose).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import YAML from 'yaml';
import { configSchemaText } from '../../src/cli/config-schema.js';
import { configJsonSchema, CONFIG_SCHEMA_FILE } from '../../src/config/json-schema.js';
import { docFiles, fencedBlocks } from '../helpers/docs.js';
import { CLI } from '../helpers/ops-processes.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { DESCRIPTIONS_FILE, descriptionsModule } from '../helpers/settings-jsdoc.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const run = promisify(execFile);

/** The environment of a new user: none of the developer's toolrouter settings. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['TOOLROUTER_CONFIG', 'REDIS_URL', 'ADMIN_KEY', 'PORT', 'HOST', 'STATE_DIR']) delete env[name];
  return { ...env, LOG_LEVEL: 'warn' };
}

const toolrouter = (args: string[]) => run(process.execPath, [...CLI, ...args], { cwd: REPO_ROOT, env: cleanEnv(), maxBuffer: 16 * 1024 * 1024 });

describe('docs that cannot drift', { timeout: 5 * 60_000 }, () => {
  it('every yaml block in README.md and docs/ is a configuration the schema accepts', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    ajvFormats.default(ajv);
    const validate = ajv.compile(configJsonSchema());
    const problems: string[] = [];
    let checked = 0;
    for (const file of docFiles()) {
      for (const block of fencedBlocks(file).filter((found) => found.lang === 'yaml' && found.marker !== 'yaml: partial')) {
        for (const document of YAML.parseAllDocuments(block.text)) {
          const where = `${block.file}:${block.line}`;
          if (document.errors.length > 0) {
            problems.push(`${where}: not YAML: ${document.errors[0]!.message}`);
            continue;
          }
          checked++;
          if (!validate(document.toJS() ?? {})) {
            problems.push(...(validate.errors ?? []).map((error) => `${where}: ${error.instancePath || '/'} ${error.message} ${JSON.stringify(error.params)}`));
          }
        }
      }
    }
    assert.deepEqual(problems, []);
    assert.ok(checked >= 10, `only ${checked} yaml blocks found`);
  });

  it('table cells stay short: what takes more than 200 characters is told in prose', () => {
    const long: string[] = [];
    for (const file of docFiles()) {
      readFileSync(path.join(REPO_ROOT, file), 'utf8').split('\n').forEach((line, index) => {
        if (!line.startsWith('|')) return;
        for (const cell of line.split(/(?<!\\)\|/).slice(1, -1)) if (cell.trim().length > 200) long.push(`${file}:${index + 1}: ${cell.trim().slice(0, 60)}…`);
      });
    }
    assert.deepEqual(long, []);
  });

  it('settings carry their source comments into the schema', () => {
    const schema = configJsonSchema() as { properties: { mcp: { properties: { connectTimeoutMs: { description?: string } } } } };
    assert.match(schema.properties.mcp.properties.connectTimeoutMs.description ?? '', /counts as down/);
  });

  it('the schema refuses what the service refuses: a misspelled setting fails the docs check', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    ajvFormats.default(ajv);
    const validate = ajv.compile(configJsonSchema());
    assert.equal(validate({ mcp: { serverz: {} } }), false);
    assert.equal(validate({ search: { minScore: 2 } }), false);
    assert.equal(validate({ mcp: { servers: { files: { command: 'npx', args: ['-y', 'x'] } } } }), true);
  });

  it('the committed reference and schema are current (run `npm run docs:config` after changing a setting)', () => {
    const stale = 'stale: run `npm run docs:config` and commit the result';
    assert.equal(readFileSync(path.join(REPO_ROOT, DESCRIPTIONS_FILE), 'utf8'), descriptionsModule(), `${DESCRIPTIONS_FILE} is ${stale}`);
    assert.equal(readFileSync(path.join(REPO_ROOT, CONFIG_SCHEMA_FILE), 'utf8'), configSchemaText('json'), `${CONFIG_SCHEMA_FILE} is ${stale}`);
    assert.equal(readFileSync(path.join(REPO_ROOT, 'docs/configuration.md'), 'utf8'), configSchemaText('markdown'), `docs/configuration.md is ${stale}`);
  });

  it('config.example.yaml names the schema for editors, and config check accepts it', async () => {
    const example = readFileSync(path.join(REPO_ROOT, 'config.example.yaml'), 'utf8');
    assert.match(example.split('\n')[0]!, new RegExp(`^# yaml-language-server: \\$schema=${CONFIG_SCHEMA_FILE.replace('.', '\\.')}$`));
    const { stdout } = await toolrouter(['--config', 'config.example.yaml', 'config', 'check']);
    assert.match(stdout, /^port: 8080$/m);
  });

  it('`toolrouter config schema` prints the JSON Schema (draft 2020-12), and `--version` the version', async () => {
    const { stdout } = await toolrouter(['config', 'schema']);
    const schema = JSON.parse(stdout) as { $schema: string; properties: Record<string, unknown> };
    assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.ok(schema.properties.mcp && schema.properties.search);
    assert.equal(stdout, readFileSync(path.join(REPO_ROOT, CONFIG_SCHEMA_FILE), 'utf8'));
    const { version } = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.equal((await toolrouter(['--version'])).stdout.trim(), version);
  });

  describe('command blocks marked to run', () => {
    let api: RunningRouter;
    before(async () => {
      api = await startRouter();
    });
    after(async () => {
      await api.close();
    });

    it('run as written against a started router, in order, each succeeding', async () => {
      const blocks = docFiles().flatMap(fencedBlocks).filter((block) => block.marker === 'docs-test: run');
      assert.ok(blocks.length >= 1, 'no block is marked <!-- docs-test: run -->');
      const host = api.url.replace('http://', '');
      for (const block of blocks) {
        // One command per line; a trailing backslash continues it.
        const commands = block.text.replace(/\\\n\s*/g, '').split('\n').map((line) => line.trim()).filter((line) => line && !line.startsWith('#'));
        for (const command of commands) {
          const local = command
            .replace(/(?:localhost|127\.0\.0\.1):8080/g, host)
            .replace(/^curl /, 'curl -sS --fail-with-body ');
          const { stdout } = await run('bash', ['-c', local], { cwd: REPO_ROOT, env: cleanEnv() }).catch((error: { stdout?: string; stderr?: string }) => {
            assert.fail(`${block.file}:${block.line}: \`${command}\` failed: ${error.stderr ?? ''} ${error.stdout ?? ''}`);
          });
          if (command.includes('/v1/tools/search')) {
            const answer = JSON.parse(stdout) as { results: Array<{ name: string }> };
            assert.ok(answer.results.length > 0, `${command}: no results`);
          }
          // The catalog PUT is answered before the index has the tools; the search after it needs them.
          if (command.includes('/v1/catalog/sources/')) await api.indexed();
        }
      }
    });
  });
});
