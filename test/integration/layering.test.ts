import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { REPO_ROOT } from '../helpers/paths.js';

/**
 * The layering rule `npm run lint` runs (.dependency-cruiser.cjs), on a small tree of fixture files laid out like
 * src/: it must refuse each kind of violation and let each allowed import through. (`npm run lint` itself shows the
 * real tree passes.)
 */
describe('layering rule (.dependency-cruiser.cjs)', () => {
  let dir: string;
  let violations: { rule: string; from: string; to: string }[];
  const files: Record<string, string> = {
    'src/redis/connection.ts': 'export const redis = 1;\n',
    'src/package-root.ts': 'export const root = "/";\n',
    'src/catalog/catalog.ts': "import { redis } from '../redis/connection.js';\nexport const catalog = redis;\n",
    'src/search/search.ts': "import { catalog } from '../catalog/catalog.js';\nexport const search = catalog;\n",
    // Upward: a module below config/ reading the configuration.
    'src/indexing/indexing.ts': "import type { Config } from '../config/config.js';\nexport type Indexing = Config;\n",
    // Upward: the catalog reaching for search.
    'src/catalog/upward.ts': "import { search } from '../search/search.js';\nexport const upward = search;\n",
    'src/config/config.ts': "import { search } from '../search/search.js';\nimport { root } from '../package-root.js';\nexport type Config = { search: typeof search; root: typeof root };\n",
    // A global path read below the top.
    'src/embedding/models.ts': "import { root } from '../package-root.js';\nexport const models = root;\n",
    // Faces: through the HTTP seam is fine, straight into another face is not.
    'src/http/auth.ts': 'export const accessOf = 1;\n',
    'src/mcp/gateway/gateway.ts': "import { connection } from '../upstream/connection.js';\nexport const gateway = connection;\n",
    'src/chat/routes.ts': "import { accessOf } from '../http/auth.js';\nimport { gateway } from '../mcp/gateway/gateway.js';\nexport const routes = accessOf + gateway;\n",
    // Inside the MCP face: the server calls the gateway, which calls upstreams; an upstream never reaches back up.
    'src/mcp/server/server.ts': "import { gateway } from '../gateway/gateway.js';\nexport const server = gateway;\n",
    'src/mcp/upstream/connection.ts': 'export const connection = 1;\n',
    'src/mcp/upstream/upward.ts': "import { server } from '../server/server.js';\nexport const upward = server;\n",
    // Inside the chat face: the core imports no dialect; a dialect imports the core and its shared folder, no other dialect.
    'src/chat/core/dialect.ts': 'export interface Dialect { api: string }\n',
    'src/chat/core/rewriter.ts': "import type { Dialect } from './dialect.js';\nimport { tools } from '../openai/tools.js';\nexport const rewriter = (d: Dialect) => d.api + tools;\n",
    'src/chat/openai/tools.ts': 'export const tools = 1;\n',
    'src/chat/openai-chat/dialect.ts': "import type { Dialect } from '../core/dialect.js';\nimport { tools } from '../openai/tools.js';\nexport const chat: Dialect = { api: 'chat' + tools };\n",
    'src/chat/anthropic/dialect.ts': "import type { Dialect } from '../core/dialect.js';\nimport { tools } from '../openai/tools.js';\nexport const anthropic: Dialect = { api: 'anthropic' + tools };\n",
    // Import cycles are refused, a cycle closed by a type import only too.
    'src/search/a.ts': "import { b } from './b.js';\nexport const a = 1;\nexport const ab = () => b;\n",
    'src/search/b.ts': "import { a } from './a.js';\nexport const b = a;\n",
    'src/http/app.ts': "import { routes } from './routes.js';\nexport interface AppDependencies { n: number }\nexport const app = routes;\n",
    'src/http/routes.ts': "import type { AppDependencies } from './app.js';\nexport const routes = (deps: AppDependencies) => deps.n;\n",
  };

  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-layering-'));
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      writeFileSync(path.join(dir, file), text);
    }
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true }, include: ['src'] }));
    const cruise = (...args: string[]) =>
      spawnSync(process.execPath, [path.join(REPO_ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs'), 'src', '--config', path.join(REPO_ROOT, '.dependency-cruiser.cjs'), ...args], { cwd: dir, encoding: 'utf8' });
    // As `npm run lint` runs it: violations make it exit non-zero.
    assert.notEqual(cruise().status, 0, 'violations make the lint run fail');
    const run = cruise('--output-type', 'json');
    const result = JSON.parse(run.stdout) as { summary: { violations: { rule: { name: string }; from: string; to: string }[] } };
    violations = result.summary.violations.map((v) => ({ rule: v.rule.name, from: v.from, to: v.to }));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const refused = (from: string, to: string) => violations.filter((v) => v.from === from && v.to === to).map((v) => v.rule);

  it('refuses an import from a lower layer into a higher one', () => {
    assert.deepEqual(refused('src/indexing/indexing.ts', 'src/config/config.ts'), ['layer-index-imports-upward']);
    assert.deepEqual(refused('src/catalog/upward.ts', 'src/search/search.ts'), ['layer-catalog-imports-upward']);
  });

  it('refuses package-root below the top, and allows it at the top', () => {
    assert.ok(refused('src/embedding/models.ts', 'src/package-root.ts').includes('package-root-only-at-the-top'));
    assert.deepEqual(refused('src/config/config.ts', 'src/package-root.ts'), []);
  });

  it('keeps faces apart except through the HTTP seams', () => {
    assert.deepEqual(refused('src/chat/routes.ts', 'src/mcp/gateway/gateway.ts'), ['face-chat-imports-another-face']);
    assert.deepEqual(refused('src/chat/routes.ts', 'src/http/auth.ts'), []);
  });

  it('keeps the MCP face\'s roles in order: server → gateway → upstream', () => {
    assert.deepEqual(refused('src/mcp/upstream/upward.ts', 'src/mcp/server/server.ts'), ['mcp-upstream-imports-upward']);
    assert.deepEqual(refused('src/mcp/server/server.ts', 'src/mcp/gateway/gateway.ts'), []);
    assert.deepEqual(refused('src/mcp/gateway/gateway.ts', 'src/mcp/upstream/connection.ts'), []);
  });

  it('keeps the chat core provider-free and the chat dialects apart', () => {
    assert.deepEqual(refused('src/chat/core/rewriter.ts', 'src/chat/openai/tools.ts'), ['chat-core-imports-a-dialect']);
    assert.deepEqual(refused('src/chat/anthropic/dialect.ts', 'src/chat/openai/tools.ts'), ['chat-dialect-imports-another-dialect']);
    assert.deepEqual(refused('src/chat/openai-chat/dialect.ts', 'src/chat/openai/tools.ts'), []);
    assert.deepEqual(refused('src/chat/openai-chat/dialect.ts', 'src/chat/core/dialect.ts'), []);
  });

  it('refuses import cycles, those closed by a type import only too', () => {
    assert.ok(violations.some((v) => v.rule === 'no-circular' && v.from.startsWith('src/search/')));
    assert.ok(violations.some((v) => v.rule === 'no-circular' && v.from.startsWith('src/http/')));
  });

  it('allows imports downward', () => {
    assert.deepEqual(refused('src/search/search.ts', 'src/catalog/catalog.ts'), []);
    assert.deepEqual(refused('src/config/config.ts', 'src/search/search.ts'), []);
    assert.deepEqual(refused('src/catalog/catalog.ts', 'src/redis/connection.ts'), []);
  });
});
