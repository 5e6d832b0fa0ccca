import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { REPO_ROOT } from '../helpers/paths.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { waitFor } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/** Issue 21, cases 1, 2, 6, 10 and 12: hostile structure is bounded before any work, and keys see only their own view. */

const hostileServer = {
  command: process.execPath,
  args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/hostile-server.ts')],
  cwd: REPO_ROOT,
};

function nested(levels: number, leaf: unknown = 1): string {
  return '{"a":'.repeat(levels) + JSON.stringify(leaf) + '}'.repeat(levels);
}

/**
 * Runs `work` while probing /health back to back; returns the work's result and the slowest probe. A blocked event loop
 * shows as a probe that waits as long as the block.
 */
async function whileProbing<T>(url: string, work: () => Promise<T>): Promise<{ result: T; slowestHealthMs: number; probes: number }> {
  let done = false;
  let slowest = 0;
  let probes = 0;
  const probing = (async () => {
    // Bounded: at most 2,000 probes (the work itself is bounded by the test's timeout).
    while (!done && probes < 2_000) {
      const started = performance.now();
      const reply = await fetch(`${url}/health`);
      await reply.text();
      slowest = Math.max(slowest, performance.now() - started);
      probes++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  try {
    const result = await work();
    return { result, slowestHealthMs: slowest, probes };
  } finally {
    done = true;
    await probing;
  }
}

describe('hostile input (issue 21)', () => {
  let api: RunningRouter;
  const admin = (method: string, route: string, body?: unknown) => call(api.url, method, route, { key: ADMIN_KEY, body });

  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, mcp: { search: true, servers: { hostile: hostileServer } } });
    await waitFor('the hostile upstream to list', () => api.router.catalog.get('hostile__plain'));
    const put = await admin('PUT', '/v1/catalog/sources/base', {
      tools: [{ name: 'base_tool', description: 'a base tool', inputSchema: { type: 'object', properties: { q: { type: 'string', pattern: '^[a-z]+$' } } } }],
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await api.indexed();
  });

  after(async () => {
    await api?.close();
  });

  it('case 1: a 1,000,000-entry enum (7 MB) is refused with 400 while /health keeps answering within a second', async () => {
    const hashBefore = api.router.catalog.snapshot().catalogHash;
    const values = Array.from({ length: 1_000_000 }, (_, i) => `value${i}`);
    const body = JSON.stringify({ tools: [{ name: 'enum_bomb', inputSchema: { type: 'object', properties: { v: { enum: values } } } }] });
    assert.ok(body.length > 7_000_000);
    const { result, slowestHealthMs, probes } = await whileProbing(api.url, () => admin('PUT', '/v1/catalog/sources/bomb', body));
    assert.equal(result.status, 400, JSON.stringify(result.body).slice(0, 300));
    assert.match(result.body.error.message, /array of 1000000 entries \(at most 1000\)/);
    assert.ok(probes > 0);
    process.stdout.write(`# 1,000,000-entry enum PUT: slowest /health ${slowestHealthMs.toFixed(0)} ms over ${probes} probes\n`);
    assert.ok(slowestHealthMs < 1_000, `/health waited ${slowestHealthMs.toFixed(0)} ms`);
    assert.equal(api.router.catalog.snapshot().catalogHash, hashBefore);
    assert.equal(api.router.catalog.hasSource('bomb'), false);
  });

  it('case 2: a ReDoS argument on an upstream tool with pattern ^(a+)+$ is rejected at once (RE2)', async () => {
    const argument = `${'a'.repeat(40)}b`;
    const { result, slowestHealthMs } = await whileProbing(api.url, () =>
      admin('POST', '/mcp-rest/tools/call', { name: 'hostile__redos', arguments: { s: argument } }),
    );
    assert.equal(result.status, 400, JSON.stringify(result.body));
    assert.match(JSON.stringify(result.body), /must match pattern/);
    process.stdout.write(`# ReDoS argument (41 characters): slowest /health ${slowestHealthMs.toFixed(0)} ms\n`);
    assert.ok(slowestHealthMs < 1_000, `/health waited ${slowestHealthMs.toFixed(0)} ms`);
    const fine = await admin('POST', '/mcp-rest/tools/call', { name: 'hostile__redos', arguments: { s: 'aaaa' } });
    assert.equal(fine.status, 200, JSON.stringify(fine.body));
  });

  it('case 12: an invalid or unsupported pattern is a 400 at registration; upstream tools are left out one by one', async () => {
    for (const pattern of ['(', '(?=lookahead)', '(a)\\1']) {
      const put = await admin('PUT', '/v1/catalog/sources/patterns', {
        tools: [{ name: 'patterned', inputSchema: { type: 'object', properties: { s: { type: 'string', pattern } } } }],
      });
      assert.equal(put.status, 400, pattern);
      assert.match(put.body.error.message, /pattern .* invalid or not supported/);
    }
    const patternProperties = await admin('PUT', '/v1/catalog/sources/patterns', {
      tools: [{ name: 'patterned', inputSchema: { type: 'object', patternProperties: { '[': { type: 'string' } } } }],
    });
    assert.equal(patternProperties.status, 400);
    assert.equal(api.router.catalog.hasSource('patterns'), false);

    const servers = await admin('GET', '/v1/mcp/servers');
    const hostile = servers.body.servers.find((server: { name: string }) => server.name === 'hostile');
    const skipped = hostile.skipped.join('\n');
    assert.match(skipped, /bad_pattern: .*pattern "\(" that is invalid/);
    assert.match(skipped, /huge_enum: .*array of 40000 entries/);
    assert.match(skipped, /deep: .*nests deeper than 64 levels/);
    assert.ok(api.router.catalog.get('hostile__plain'));
    assert.ok(api.router.catalog.get('hostile__redos'));
    assert.equal(api.router.catalog.get('hostile__deep'), undefined);
  });

  it('case 6: deeply nested bodies get 400 on every route and change nothing', async () => {
    const hashBefore = api.router.catalog.snapshot().catalogHash;
    const keysBefore = (await admin('GET', '/key/list')).body.keys.length;

    const deepTool = `{"tools":[{"name":"deep_tool","inputSchema":{"type":"object","properties":${nested(5_000)}}}]}`;
    const put = await admin('PUT', '/v1/catalog/sources/deep', deepTool);
    assert.equal(put.status, 400);
    assert.equal(put.body.error.code, 'json_too_deep');
    assert.equal(api.router.catalog.snapshot().catalogHash, hashBefore);

    const key = await admin('POST', '/key/generate', `{"metadata":${nested(100_000)}}`);
    assert.equal(key.status, 400);
    assert.equal(key.body.error.code, 'json_too_deep');
    const listed = await admin('GET', '/key/list');
    assert.equal(listed.status, 200);
    assert.equal(listed.body.keys.length, keysBefore);

    const args = await admin('POST', '/mcp-rest/tools/call', `{"name":"hostile__plain","arguments":${nested(10_000)}}`);
    assert.equal(args.status, 400);
    assert.equal(args.body.error.code, 'json_too_deep');

    // The proxy routes read their bodies raw (the dry run parses them as chat and Responses do) and answer OpenAI-style.
    const rewrite = await admin('POST', '/v1/tools/rewrite', `{"model":"m","messages":[{"role":"user","content":${nested(10_000, 'x')}}]}`);
    assert.equal(rewrite.status, 400, JSON.stringify(rewrite.body));
    assert.equal(rewrite.body.error.code, 'json_too_deep');
    assert.equal(rewrite.body.error.type, 'invalid_request_error');

    // Within the limit is fine; the limit counts arrays too.
    assert.equal((await admin('POST', '/v1/tools/search', { query: 'base', top_k: 1 })).status, 200);
    const arrays = await admin('POST', '/v1/tools/search', `{"query":"base","weights":${'['.repeat(100)}${']'.repeat(100)}}`);
    assert.equal(arrays.status, 400);
    assert.equal(arrays.body.error.code, 'json_too_deep');

    assert.equal((await admin('GET', '/v1/catalog')).status, 200);
    assert.equal((await admin('POST', '/v1/tools/search', { query: 'base tool' })).status, 200);
  });

  it('case 10: a restricted key sees its own counts and a hash of its own view, unchanged by other sources', async () => {
    const key = await generateKey(api.url, { allowed_servers: ['base'] });
    const mine = await call(api.url, 'GET', '/v1/index/status', { key: key.key });
    const whole = await admin('GET', '/v1/index/status');
    assert.equal(mine.status, 200);
    assert.equal(mine.body.state, 'ready');
    assert.equal(mine.body.tools, 1);
    assert.ok(whole.body.tools > 1);
    assert.notEqual(mine.body.catalogHash, whole.body.catalogHash);
    assert.equal(mine.body.indexedHash, mine.body.catalogHash);
    const searched = await call(api.url, 'POST', '/v1/tools/search', { key: key.key, body: { query: 'base tool' } });
    assert.equal(searched.body.index.hash, mine.body.catalogHash);

    // Another tenant's tools change: the admin sees it, the key's view does not move.
    const other = await admin('PUT', '/v1/catalog/sources/other_tenant', { tools: [{ name: 'other_tool', inputSchema: { type: 'object' } }] });
    assert.equal(other.status, 200);
    await api.indexed();
    const wholeAfter = await admin('GET', '/v1/index/status');
    assert.notEqual(wholeAfter.body.catalogHash, whole.body.catalogHash);
    const mineAfter = await call(api.url, 'GET', '/v1/index/status', { key: key.key });
    assert.deepEqual(
      { state: mineAfter.body.state, tools: mineAfter.body.tools, catalogHash: mineAfter.body.catalogHash },
      { state: 'ready', tools: 1, catalogHash: mine.body.catalogHash },
    );
    const searchedAfter = await call(api.url, 'POST', '/v1/tools/search', { key: key.key, body: { query: 'base tool' } });
    assert.equal(searchedAfter.body.index.hash, mine.body.catalogHash);
  });
});
