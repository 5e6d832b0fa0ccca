import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter } from '../helpers/router.js';

const run = promisify(execFile);

describe('the first hour: config check runs serve\'s checks and names what is wrong', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-first-hour-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** `toolrouter config check` on a config file, with none of the developer's settings; exit code and stderr. */
  async function check(config: Record<string, unknown>): Promise<{ code: number; stderr: string }> {
    const file = path.join(dir, `config-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(file, JSON.stringify(config));
    const env: NodeJS.ProcessEnv = { ...process.env, TOOLROUTER_CONFIG: file };
    for (const name of ['REDIS_URL', 'ADMIN_KEY', 'PORT', 'HOST']) delete env[name];
    return run(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'src/cli.ts'), 'config', 'check'], { env }).then(
      ({ stderr }) => ({ code: 0, stderr }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
    );
  }

  test('a missing or invalid mcp.import file fails the check (as it fails serve), naming the file', async () => {
    const missing = await check({ mcp: { import: [path.join(dir, 'nope.json')] } });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /mcp\.import: cannot read MCP config .*nope\.json/);
    const broken = path.join(dir, 'broken.json');
    writeFileSync(broken, '{"mcpServers": {');
    const invalid = await check({ mcp: { import: [broken] } });
    assert.equal(invalid.code, 2);
    assert.match(invalid.stderr, /broken\.json is not valid JSON/);
  });

  test('a typo inside a server entry is named with the right spelling', async () => {
    const typo = await check({ mcp: { servers: { files: { comand: 'npx', args: ['x'] } } } });
    assert.equal(typo.code, 2);
    assert.match(typo.stderr, /unknown key "comand" \(did you mean "command"\?\)/);
    const transport = await check({ mcp: { servers: { web: { type: 'htp', url: 'http://127.0.0.1:9/mcp' } } } });
    assert.equal(transport.code, 2);
    assert.match(transport.stderr, /type: "htp" is not a transport \(stdio, http or sse\) \(did you mean "http"\?\)/);
  });

  test('entries an import leaves out pass the check with a note, and are listed with the reason in GET /v1/mcp/servers', async () => {
    const file = path.join(dir, '.mcp.json');
    writeFileSync(file, JSON.stringify({ mcpServers: { bad: { type: 'htp', url: 'http://127.0.0.1:9/mcp' }, unset: { url: '${FIRST_HOUR_UNSET_VARIABLE}/mcp' } } }));
    const noted = await check({ mcp: { import: [file] } });
    assert.equal(noted.code, 0, noted.stderr);
    assert.match(noted.stderr, /left out: .*server "bad": type: "htp"/);
    const api = await startRouter({ mcp: { import: [file] } });
    try {
      const listed = await api.request('GET', '/v1/mcp/servers');
      assert.equal(listed.status, 200);
      const leftOut = (listed.body as { leftOut: { name: string; reason: string; file: string }[] }).leftOut;
      assert.deepEqual(leftOut.map((entry) => entry.name).sort(), ['bad', 'unset']);
      assert.match(leftOut.find((entry) => entry.name === 'unset')!.reason, /FIRST_HOUR_UNSET_VARIABLE is not set/);
      assert.equal(leftOut[0]!.file, file);
    } finally {
      await api.close();
    }
  });

  test('REST search: {"topK": 2} is refused with the field\'s name, top_k', async () => {
    const api = await startRouter();
    try {
      const reply = await api.post('/v1/tools/search', { query: 'weather', topK: 2 });
      assert.equal(reply.status, 400);
      assert.match(JSON.stringify(reply.body), /topK: unknown field; the field is \\"top_k\\"/);
    } finally {
      await api.close();
    }
  });
});
