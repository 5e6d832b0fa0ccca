import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, ListToolsResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { connectHttpClient, stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/** The stdio fixture's tools, as the gateway names them: 9, one under the default threshold of 10. */
const FILES_TOOLS = ['echo', 'add', 'slow', 'lookup_records', 'pid', 'env', 'fail', 'add_tool', 'remove_tool'].map((name) => `files__${name}`);
const VIRTUAL = ['search_tools', 'call_tool'];

async function listedNames(client: Client): Promise<string[]> {
  const names: string[] = [];
  for (let page = await client.listTools(); ; page = await client.listTools({ cursor: page.nextCursor })) {
    names.push(...page.tools.map((tool) => tool.name));
    if (!page.nextCursor) return names;
  }
}

async function withQuery(client: Client, query: string): Promise<string[]> {
  const result = await client.request({ method: 'tools/list', params: { query } as { cursor?: string } }, ListToolsResultSchema);
  return result.tools.map((tool) => tool.name);
}

async function startFilesRouter(mcp: Record<string, unknown>, search: Record<string, unknown> = {}): Promise<RunningRouter> {
  const api = await startRouter({ search, mcp: { servers: { files: stdioFixtureServer() }, ...mcp } });
  await api.router.mcp.upstreams.settled();
  await api.indexed();
  return api;
}

describe('mcp.search "auto" (the default): by tool count', () => {
  let api: RunningRouter;
  let client: Client;
  let listChanged: () => number;

  before(async () => {
    api = await startFilesRouter({}, { pinned: ['files__echo'] });
    ({ client, listChanged } = await connectHttpClient(api.url));
  });
  after(async () => {
    await client?.close();
    await api?.close();
  });

  const catalogHas = (name: string, present: boolean) => waitFor(`${name} ${present ? 'in' : 'out of'} the catalog`, () => (api.router.catalog.get(name) !== undefined) === present);

  it('lists the whole catalog while it is small, and the instructions explain the switch', async () => {
    assert.equal(api.router.config.mcp.search, 'auto');
    assert.deepEqual(await listedNames(client), FILES_TOOLS);
    const activation = api.router.mcp.gateway.searchActivation();
    assert.equal(activation.active, false);
    assert.equal(activation.reason, 'below_threshold');
    assert.equal(activation.tools, 9);
    assert.ok(activation.tokens! > 0 && activation.tokens! < 10_000, `${activation.tokens}`);
    const instructions = client.getInstructions() ?? '';
    assert.match(instructions, /While they are few \(at most 10 tools and 10000 tokens of definitions\), tools\/list lists all of them/);
    assert.match(instructions, /notifications\/tools\/list_changed/);
  });

  it('keeps search_tools, call_tool and SEP-1821 queries working while they are not listed', async () => {
    const found = await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers', top_k: 3 } });
    assert.ok(!found.isError, textOf(found));
    assert.ok((found.structuredContent as { tools: { name: string }[] }).tools.some((tool) => tool.name === 'files__add'));
    assert.equal(textOf(await client.callTool({ name: 'call_tool', arguments: { name: 'files__add', arguments: { a: 2, b: 3 } } })), '5');
    assert.ok((await withQuery(client, 'sum of two numbers')).includes('files__add'));
  });

  it('switches to search past the tool count and back when it shrinks, notifying each switch', { timeout: 30_000 }, async () => {
    const start = listChanged();
    // 10 tools: still the aggregator, whose list changed (one notification).
    await client.callTool({ name: 'files__add_tool', arguments: { name: 'dyn_a' } });
    await waitFor('list_changed for the tenth tool', () => listChanged() > start);
    assert.deepEqual(await listedNames(client), [...FILES_TOOLS, 'files__dyn_a']);

    // 11 tools: search takes over; the pinned tool and the virtual tools are what is listed.
    await client.callTool({ name: 'files__add_tool', arguments: { name: 'dyn_b' } });
    await waitFor('list_changed for the switch to search', () => listChanged() > start + 1);
    assert.deepEqual(await listedNames(client), ['files__echo', ...VIRTUAL]);
    assert.equal(api.router.mcp.gateway.searchActivation().reason, 'tool_count');
    // The decision is a function of the list a caller sees: three visible tools would be listed whole.
    assert.equal(api.router.mcp.gateway.searchActivation(api.router.mcp.gateway.callableEntries().slice(0, 3)).active, false);
    await api.indexed();
    assert.ok((await withQuery(client, 'dynamically added tool dyn_b')).includes('files__dyn_b'), 'SEP-1821 queries search the catalog in search mode too');

    // A 12th tool lists no new tool, but search_tools' description counts the server's tools: one notification as it
    // comes and one as it goes. Then back to 10: the aggregator returns, a third.
    const inSearch = listChanged();
    await client.callTool({ name: 'files__add_tool', arguments: { name: 'dyn_c' } });
    await catalogHas('files__dyn_c', true);
    await waitFor('list_changed for the 12th tool in the count', () => listChanged() > inSearch);
    await client.callTool({ name: 'files__remove_tool', arguments: { name: 'dyn_c' } });
    await catalogHas('files__dyn_c', false);
    await waitFor('list_changed for the count back to 11', () => listChanged() > inSearch + 1);
    await client.callTool({ name: 'files__remove_tool', arguments: { name: 'dyn_b' } });
    await waitFor('list_changed for the switch back', () => listChanged() > inSearch + 2);
    await catalogHas('files__dyn_b', false);
    assert.equal(listChanged(), inSearch + 3, 'one notification per change of what is listed or described');
    assert.deepEqual(await listedNames(client), [...FILES_TOOLS, 'files__dyn_a']);
    assert.equal(api.router.mcp.gateway.searchActivation().active, false);
  });
});

describe('mcp.search "auto": by token budget', () => {
  let api: RunningRouter;
  let client: Client;
  let listChanged: () => number;

  before(async () => {
    api = await startFilesRouter({}, { activation: { maxTools: 100, maxTokens: 2_000 } });
    ({ client, listChanged } = await connectHttpClient(api.url));
  });
  after(async () => {
    await client?.close();
    await api?.close();
  });

  it('switches when the definitions outgrow the budget and back when they shrink', { timeout: 30_000 }, async () => {
    const small = api.router.mcp.gateway.searchActivation();
    assert.equal(small.active, false);
    assert.ok(small.tokens! < 2_000, `${small.tokens}`);
    assert.deepEqual(await listedNames(client), FILES_TOOLS);

    const start = listChanged();
    const description = 'Reads live sensor measurements from the plant floor controllers and reports anomalies. '.repeat(150);
    await client.callTool({ name: 'files__add_tool', arguments: { name: 'plant_sensors', description } });
    await waitFor('list_changed for the switch to search', () => listChanged() > start);
    await waitFor('search mode', () => api.router.mcp.gateway.searchActivation().active);
    const big = api.router.mcp.gateway.searchActivation();
    assert.equal(big.reason, 'token_budget');
    assert.equal(big.tools, 10, 'under the tool count: the tokens decided');
    assert.ok(big.tokens! > 2_000, `${big.tokens}`);
    assert.deepEqual(await listedNames(client), VIRTUAL);

    const inSearch = listChanged();
    await client.callTool({ name: 'files__remove_tool', arguments: { name: 'plant_sensors' } });
    await waitFor('list_changed for the switch back', () => listChanged() > inSearch);
    assert.deepEqual(await listedNames(client), FILES_TOOLS);
  });
});

describe('mcp.search forced', () => {
  let on: RunningRouter;
  let off: RunningRouter;

  before(async () => {
    [on, off] = await Promise.all([
      startFilesRouter({ search: true }),
      // A threshold the catalog is far over: false lists everything all the same.
      startFilesRouter({ search: false }, { activation: { maxTools: 2, maxTokens: 10 } }),
    ]);
  });
  after(async () => {
    await on?.close();
    await off?.close();
  });

  it('true lists the virtual tools even for a small catalog', async () => {
    const { client } = await connectHttpClient(on.url);
    try {
      assert.deepEqual(await listedNames(client), VIRTUAL);
      assert.deepEqual(on.router.mcp.gateway.searchActivation(), { active: true, reason: 'forced', tools: 9 });
      assert.match(client.getInstructions() ?? '', /Only a few tools are listed/);
      assert.ok((await withQuery(client, 'add two numbers')).includes('files__add'));
    } finally {
      await client.close();
    }
  });

  it('false lists every tool past any threshold, and the virtual tool names do not exist', async () => {
    const { client } = await connectHttpClient(off.url);
    try {
      assert.deepEqual(await listedNames(client), FILES_TOOLS);
      assert.equal(off.router.mcp.gateway.searchActivation().active, false);
      await assert.rejects(
        client.callTool({ name: 'search_tools', arguments: { query: 'x' } }),
        (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams,
      );
      assert.ok((await withQuery(client, 'add two numbers')).includes('files__add'), 'SEP-1821 queries work without search too');
    } finally {
      await client.close();
    }
  });
});
