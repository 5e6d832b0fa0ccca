/**
 * Server context and what search_tools says it covers, with real parts: two stdio MCP servers written with the SDK (one
 * describing itself through `instructions`, one described in its config entry), a static source PUT with a
 * description, API keys that see different servers, and real MCP clients.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ADMIN_KEY, call, generateKey, mcpClientWithKey } from '../helpers/keys.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/** Every text part of a tool result: the JSON first, then the sentences for the model. */
const allText = (result: { content?: { type: string; text?: string }[] }) => (result.content ?? []).map((part) => part.text ?? '').join('\n');

const searchToolOf = async (client: Client) => (await client.listTools()).tools.find((tool) => tool.name === 'search_tools');

describe('server context and a search tool that says what it covers', () => {
  let api: RunningRouter;
  let filesClient: Client;
  let vaultClient: Client;

  before(async () => {
    api = await startRouter({
      adminKey: ADMIN_KEY,
      mcp: {
        search: true,
        servers: {
          // Says nothing in its config: its description is what the server says of itself (instructions).
          files: stdioFixtureServer(),
          // Described in its config entry, which wins over what the server says.
          vault: { ...stdioFixtureServer(), description: 'Secrets vault: keeps credentials for deployments.' },
        },
      },
    });
    await waitFor('both upstreams connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 20_000);
    await api.indexed();
    const filesKey = await generateKey(api.url, { allowed_servers: ['files'] });
    const vaultKey = await generateKey(api.url, { allowed_servers: ['vault'] });
    filesClient = await mcpClientWithKey(api.url, filesKey.key);
    vaultClient = await mcpClientWithKey(api.url, vaultKey.key);
  });

  after(async () => {
    await filesClient?.close().catch(() => {});
    await vaultClient?.close().catch(() => {});
    await api?.close();
  });

  it('indexes each kind of source description: upstream instructions, config entry, PUT body', async () => {
    const catalog = api.router.catalog;
    assert.match(catalog.sourceDescription('files') ?? '', /Fixture utilities: echo text and add numbers/);
    assert.equal(catalog.sourceDescription('vault'), 'Secrets vault: keeps credentials for deployments.');
    const tools = [{ name: 'forecast_get', description: 'Get the outlook for a city', inputSchema: { type: 'object', properties: { city: { type: 'string' } } } }];
    const put = await call(api.url, 'PUT', '/v1/catalog/sources/sky', { key: ADMIN_KEY, body: { description: 'Meteorology service', tools } });
    assert.equal(put.status, 200);
    await api.indexed();
    // "meteorology" is only in the source's description: found through it.
    const found = await call(api.url, 'POST', '/v1/tools/search', { key: ADMIN_KEY, body: { query: 'meteorology', mode: 'bm25', min_score: 0 } });
    assert.deepEqual(found.body.results.map((hit: { name: string }) => hit.name), ['forecast_get']);
    const tooLong = await call(api.url, 'PUT', '/v1/catalog/sources/sky', { key: ADMIN_KEY, body: { description: 'x'.repeat(2_001), tools } });
    assert.equal(tooLong.status, 400);
    assert.match(tooLong.body.error.message, /description/);
    assert.equal(catalog.sourceDescription('sky'), 'Meteorology service', 'a refused PUT changes nothing');
  });

  it('search_tools and the MCP instructions name the servers each key may use, with summaries and tool counts', async () => {
    const filesTool = await searchToolOf(filesClient);
    const vaultTool = await searchToolOf(vaultClient);
    const fileCount = api.router.catalog.snapshot().entries.filter((entry) => entry.source === 'files').length;
    assert.match(filesTool!.description!, new RegExp(`- files \\(${fileCount}\\): Fixture utilities: echo text and add numbers`));
    assert.doesNotMatch(filesTool!.description!, /vault/);
    assert.match(vaultTool!.description!, /- vault \(\d+\): Secrets vault: keeps credentials for deployments\./);
    assert.doesNotMatch(vaultTool!.description!, /files \(/);
    assert.match(filesClient.getInstructions() ?? '', /- files \(\d+\): Fixture utilities/);
    assert.doesNotMatch(filesClient.getInstructions() ?? '', /vault/);
  });

  it('answers brief or full, says "N of M matching tools", and select: is always full', async () => {
    const full = (await filesClient.callTool({ name: 'search_tools', arguments: { query: 'echo text back', top_k: 2 } })) as any;
    const brief = (await filesClient.callTool({ name: 'search_tools', arguments: { query: 'echo text back', top_k: 2, detail: 'brief' } })) as any;
    assert.equal(full.structuredContent.tools[0].name, 'files__echo');
    assert.ok(full.structuredContent.tools[0].inputSchema, 'full: the definition as tools/list gives it');
    assert.deepEqual(
      { ...brief.structuredContent.tools[0], score: undefined },
      { name: 'files__echo', description: 'Echo the given text back unchanged', required: { text: 'string' }, score: undefined },
    );
    assert.equal(brief.structuredContent.tools[0].inputSchema, undefined);
    const matched = brief.structuredContent.matched as number;
    assert.ok(matched >= 2, `matched ${matched}`);
    assert.match(allText(brief), new RegExp(`2 of ${matched} matching tools`));
    assert.match(allText(brief), /select:files__echo,/);
    const selected = (await filesClient.callTool({ name: 'search_tools', arguments: { query: 'select:files__echo', detail: 'brief' } })) as any;
    assert.ok(selected.structuredContent.tools[0].inputSchema, 'select: returns full definitions even when brief is asked');
    const bad = (await filesClient.callTool({ name: 'search_tools', arguments: { query: 'echo', detail: 'short' } })) as any;
    assert.equal(bad.isError, true);
    assert.match(textOf(bad), /detail/);
  });

  it('abstains: a query no visible tool answers gets no tools and a plain sentence', async () => {
    const none = (await vaultClient.callTool({ name: 'search_tools', arguments: { query: 'zqxv florbing' } })) as any;
    assert.deepEqual(none.structuredContent.tools, []);
    assert.match(allText(none), /No tool matched "zqxv florbing": no tool of the servers searched fits it/);
    const rest = await call(api.url, 'POST', '/v1/tools/search', { key: ADMIN_KEY, body: { query: 'zqxv florbing' } });
    assert.deepEqual(rest.body.results, []);
  });

  it('scores on one scale: an off-topic query scores below an answered one, in hybrid and in bm25', async () => {
    for (const mode of ['hybrid', 'bm25']) {
      const top = async (query: string) =>
        (await call(api.url, 'POST', '/v1/tools/search', { key: ADMIN_KEY, body: { query, mode, min_score: 0 } })).body.results[0]?.score ?? 0;
      const answered = await top('echo the given text back');
      const offTopic = await top('bake a sourdough bread loaf');
      assert.ok(answered > 0.5 && answered <= 1, `${mode}: answered ${answered}`);
      assert.ok(offTopic < answered / 4, `${mode}: off-topic ${offTopic} vs answered ${answered}`);
    }
  });
});
