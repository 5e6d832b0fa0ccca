import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';

const tool = (name: string, description: string) => ({ name, description, inputSchema: { type: 'object', properties: {} } });

/** Everything a key is told about the catalog and the index: GET /v1/catalog, GET /v1/index/status, a search's `index`. */
async function answers(url: string, key: string) {
  const catalog = await call(url, 'GET', '/v1/catalog', { key });
  const status = await call(url, 'GET', '/v1/index/status', { key });
  const search = await call(url, 'POST', '/v1/tools/search', { key, body: { query: 'read a file' } });
  for (const reply of [catalog, status, search]) assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return { catalog: catalog.body, status: status.body, index: search.body.index };
}

/** Waits until the admin's status shows a build newer than `builtAt` for the current catalog. */
async function rebuiltAfter(api: RunningRouter, builtAt: string): Promise<any> {
  await api.indexed();
  const status = (await call(api.url, 'GET', '/v1/index/status', { key: ADMIN_KEY })).body;
  assert.equal(status.state, 'ready');
  assert.notEqual(status.builtAt, builtAt, 'the change was indexed by a new build');
  return status;
}

describe('a restricted key is told only what is computed from what it may see', () => {
  let api: RunningRouter;
  let mine: { key: string };

  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, catalog: { sources: { demo: fixtureTools(), tenant: [tool('ledger_export', 'Export the ledger')] } } });
    await api.indexed();
    mine = await generateKey(api.url, { allowed_servers: ['demo'] });
  });

  after(async () => {
    await api?.close();
  });

  it('answers the same before and after another tenant\'s source changes', async () => {
    const admin = (await call(api.url, 'GET', '/v1/index/status', { key: ADMIN_KEY })).body;
    const adminCatalog = (await call(api.url, 'GET', '/v1/catalog', { key: ADMIN_KEY })).body;
    const before = await answers(api.url, mine.key);
    assert.ok(before.catalog.tools.length > 0);
    assert.deepEqual(before.catalog.sources, ['demo']);
    assert.notEqual(before.catalog.catalogHash, adminCatalog.catalogHash, 'the key\'s hash is of its own view');
    assert.equal(before.status.state, 'ready');

    // Another tenant's source changes twice (a new tool, then a new description) and the index is rebuilt each time.
    await new Promise((resolve) => setTimeout(resolve, 5)); // builtAt has millisecond resolution
    assert.equal((await call(api.url, 'PUT', '/v1/catalog/sources/tenant', { key: ADMIN_KEY, body: { tools: [tool('ledger_export', 'Export the ledger'), tool('payroll_run', 'Run payroll')] } })).status, 200);
    const firstBuild = await rebuiltAfter(api, admin.builtAt);
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal((await call(api.url, 'PUT', '/v1/catalog/sources/tenant', { key: ADMIN_KEY, body: { tools: [tool('ledger_export', 'Export the whole ledger as CSV')] } })).status, 200);
    const secondBuild = await rebuiltAfter(api, firstBuild.builtAt);
    assert.notEqual(secondBuild.catalogHash, admin.catalogHash);

    const afterChange = await answers(api.url, mine.key);
    assert.deepEqual(afterChange, before);

    // What the key may see does move its answers: the same checks can fail.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const demo = fixtureTools();
    assert.equal((await call(api.url, 'PUT', '/v1/catalog/sources/demo', { key: ADMIN_KEY, body: { tools: demo.slice(1) } })).status, 200);
    await rebuiltAfter(api, secondBuild.builtAt);
    const moved = await answers(api.url, mine.key);
    assert.notEqual(moved.catalog.catalogHash, before.catalog.catalogHash);
    assert.notEqual(moved.status.catalogHash, before.status.catalogHash);
    assert.notEqual(moved.status.builtAt, before.status.builtAt);
    assert.notEqual(moved.index.hash, before.index.hash);
    assert.equal(moved.status.tools, demo.length - 1);
  });
});
