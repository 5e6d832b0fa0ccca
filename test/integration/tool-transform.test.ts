import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { Catalog } from '../../src/catalog/catalog.js';
import type { Tool } from '../../src/catalog/types.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { applyTransform, mapArguments, staticTransformProblems, toolTransformSchema, type ToolTransform } from '../../src/mcp/upstream/transform.js';
import { connectHttpClient, stdioFixtureServer, textOf } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const spec = (input: unknown): ToolTransform => toolTransformSchema.parse(input);

const upstreamTool: Tool = {
  name: 'files__lookup_records',
  description: 'Look up records',
  inputSchema: {
    type: 'object',
    properties: {
      q: { type: 'string', description: 'query string' },
      max_results: { type: 'integer', description: 'result cap' },
      api_mode: { type: 'string' },
      verbose: { type: 'boolean' },
    },
    required: ['q', 'max_results', 'api_mode'],
    additionalProperties: false,
  },
  annotations: { openWorldHint: true },
  _meta: { 'x/origin': 'fixture' },
};

const lookupTransform = {
  name: 'find_customer_orders',
  title: 'Find customer orders',
  description: 'Find orders placed by a customer in the shop database',
  tags: ['commerce', 'purchases'],
  annotations: { readOnlyHint: true },
  arguments: {
    q: { name: 'customer', description: 'customer name or email' },
    max_results: { name: 'limit', default: 3 },
    api_mode: { hide: true, default: 'safe' },
  },
};

describe('applyTransform', () => {
  it('renames and re-describes the tool and its arguments, hides arguments, sets defaults, tags and annotations', () => {
    const result = applyTransform(upstreamTool, spec({ ...lookupTransform, meta: { owner: 'ops' }, arguments: { ...lookupTransform.arguments, verbose: { required: true } } }), 'files__find_customer_orders');
    assert.ok('tool' in result, JSON.stringify(result));
    const { tool } = result;
    assert.equal(tool.name, 'files__find_customer_orders');
    assert.equal(tool.title, 'Find customer orders');
    assert.equal(tool.description, 'Find orders placed by a customer in the shop database');
    assert.deepEqual(tool.annotations, { openWorldHint: true, readOnlyHint: true });
    assert.deepEqual(tool._meta, { 'x/origin': 'fixture', owner: 'ops', tags: ['commerce', 'purchases'] });
    assert.deepEqual(tool.inputSchema, {
      type: 'object',
      properties: {
        customer: { type: 'string', description: 'customer name or email' },
        limit: { type: 'integer', description: 'result cap', default: 3 },
        verbose: { type: 'boolean' },
      },
      // q stays required under its new name; limit got a default, so it is optional; api_mode is hidden; verbose forced.
      required: ['customer', 'verbose'],
      additionalProperties: false,
    });
    // The input is not modified.
    assert.deepEqual(Object.keys(upstreamTool.inputSchema.properties!), ['q', 'max_results', 'api_mode', 'verbose']);
  });

  it('reports an unknown argument and a rename onto an argument the upstream tool already has', () => {
    const unknown = applyTransform(upstreamTool, spec({ arguments: { nope: { description: 'x' } } }));
    assert.ok('problems' in unknown);
    assert.match(unknown.problems.join(), /tool "files__lookup_records": argument "nope" is not in the upstream tool's inputSchema/);
    const onto = applyTransform(upstreamTool, spec({ arguments: { q: { name: 'verbose' } } }));
    assert.ok('problems' in onto);
    assert.match(onto.problems.join(), /tool "files__lookup_records": argument "q" is renamed onto "verbose", which the tool already has/);
  });
});

describe('mapArguments', () => {
  const transform = spec(lookupTransform);

  it('maps new names back to the upstream names and injects hidden values and defaults', () => {
    assert.deepEqual(mapArguments(transform, { customer: 'ann', limit: 7, verbose: true }), { q: 'ann', max_results: 7, verbose: true, api_mode: 'safe' });
    assert.deepEqual(mapArguments(transform, { customer: 'bob' }), { q: 'bob', max_results: 3, api_mode: 'safe' });
    assert.deepEqual(mapArguments(transform, undefined), { max_results: 3, api_mode: 'safe' });
  });

  it('never lets a client reach a hidden or renamed argument under its original name', () => {
    assert.deepEqual(mapArguments(transform, { customer: 'eve', api_mode: 'admin', q: 'sneaky' }), { q: 'eve', max_results: 3, api_mode: 'safe' });
  });

  it('leaves arguments alone when a transform has no argument changes', () => {
    const args = { a: 1 };
    assert.equal(mapArguments(spec({ description: 'x' }), args), args);
  });
});

describe('static validation', () => {
  it('finds hidden arguments without a default, renames onto another argument and double renames', () => {
    assert.deepEqual(staticTransformProblems('s__t', spec(lookupTransform)), []);
    const problems = staticTransformProblems(
      's__t',
      spec({ arguments: { a: { hide: true }, b: { name: 'c' }, c: { description: 'x' }, d: { name: 'e' }, f: { name: 'e' } } }),
    );
    assert.equal(problems.length, 3, problems.join('\n'));
    assert.match(problems[0]!, /tool "s__t": argument "a" is hidden but has no default/);
    assert.match(problems[1]!, /tool "s__t": argument "b" is renamed onto "c", which is another argument/);
    assert.match(problems[2]!, /tool "s__t": arguments "d" and "f" are both renamed to "e"/);
  });

  const load = (transforms: unknown) =>
    loadConfig({}, { mcp: { servers: { files: stdioFixtureServer() }, transforms } });

  it('loadConfig accepts a valid transform', () => {
    const config = load({ files__lookup_records: lookupTransform });
    assert.equal(config.mcp.transforms.files__lookup_records!.name, 'find_customer_orders');
    assert.equal(config.mcp.transforms.files__lookup_records!.arguments.api_mode!.hide, true);
  });

  const invalid: [string, unknown, RegExp][] = [
    ['hiding a required argument without a default', { files__add: { arguments: { a: { hide: true } } } }, /files__add.*argument "a" is hidden but has no default/],
    ['hiding and requiring an argument', { files__add: { arguments: { a: { hide: true, default: 1, required: true } } } }, /files__add.*"a" cannot be both hidden and required/],
    ['renaming onto another argument', { files__add: { arguments: { a: { name: 'b' }, b: { description: 'x' } } } }, /files__add.*argument "a" is renamed onto "b"/],
    ['renaming two arguments to one name', { files__add: { arguments: { a: { name: 'x' }, b: { name: 'x' } } } }, /files__add.*arguments "a" and "b" are both renamed to "x"/],
    ['a tool of a server that is not configured', { github__create_issue: { description: 'x' } }, /github__create_issue.*no configured MCP server/],
    ['a bare name without a server prefix', { create_issue: { description: 'x' } }, /create_issue.*no configured MCP server/],
    ['a bad new tool name', { files__add: { name: 'has spaces' } }, /mcp\.transforms\.files__add\.name/],
    ['an unknown setting', { files__add: { rename: 'sum' } }, /mcp\.transforms\.files__add/],
  ];
  for (const [what, transforms, message] of invalid) {
    it(`loadConfig rejects ${what}, naming the tool`, () => {
      assert.throws(() => load(transforms), (error: unknown) => error instanceof ConfigError && message.test(error.message));
    });
  }

  it('a transform change changes the catalog hash (and one that only moves a hidden value does not change search text)', () => {
    const hashOf = (transform: unknown) => {
      const result = applyTransform(upstreamTool, spec(transform), 'files__x');
      assert.ok('tool' in result);
      const catalog = new Catalog();
      return catalog.setSource('files', [result.tool], 'files').catalogHash;
    };
    const base = hashOf(lookupTransform);
    assert.notEqual(hashOf({ ...lookupTransform, description: 'Find orders of a customer' }), base);
    assert.notEqual(hashOf({ ...lookupTransform, tags: ['shop'] }), base);
    assert.notEqual(hashOf({ ...lookupTransform, arguments: { ...lookupTransform.arguments, q: { name: 'buyer' } } }), base);
    assert.equal(hashOf(lookupTransform), base);
  });
});

describe('tool transformation with a real upstream', () => {
  let api: RunningRouter;
  let other: RunningRouter | undefined;
  let client: Client;

  const transforms = {
    files__lookup_records: lookupTransform,
    files__fail: { hidden: true },
    // Valid on its own, but the upstream's add has a "b": this tool is left out and the problem reported.
    files__add: { arguments: { a: { name: 'b' } } },
    files__no_such_tool: { description: 'nothing' },
  };

  before(async () => {
    api = await startRouter({ mcp: { servers: { files: stdioFixtureServer() }, transforms } });
    await api.router.mcp.upstreams.settled();
    assert.equal(api.router.mcp.upstreams.status()[0]!.state, 'connected');
    await api.indexed();
    ({ client } = await connectHttpClient(api.url));
  });

  after(async () => {
    await client?.close();
    await api?.close();
    await other?.close();
  });

  it('puts the transformed definition in the catalog, under the new name only; hidden tools are absent', () => {
    const entry = api.router.catalog.get('files__find_customer_orders');
    assert.ok(entry);
    assert.equal(entry.tool.description, 'Find orders placed by a customer in the shop database');
    assert.deepEqual(Object.keys(entry.tool.inputSchema.properties ?? {}), ['customer', 'limit']);
    assert.deepEqual(entry.tool.inputSchema.required, ['customer']);
    assert.deepEqual(entry.tool._meta?.tags, ['commerce', 'purchases']);
    assert.equal(api.router.catalog.get('files__lookup_records'), undefined);
    assert.equal(api.router.catalog.get('files__fail'), undefined);
    assert.equal(api.router.catalog.get('files__add'), undefined, 'a transform that does not fit leaves the tool out');
    assert.ok(api.router.catalog.get('files__echo'), 'untransformed tools are unaffected');
  });

  it('reports transforms that do not fit the upstream in the server status', async () => {
    const response = await api.request('GET', '/v1/mcp/servers');
    assert.equal(response.status, 200);
    const problems: string[] = response.body.servers.find((server: any) => server.name === 'files').transformProblems;
    assert.equal(problems.length, 2, problems.join('\n'));
    assert.ok(problems.some((problem) => /tool "files__no_such_tool".*does not list this tool/.test(problem)));
    assert.ok(problems.some((problem) => /tool "files__add": argument "a" is renamed onto "b".*left out/.test(problem)));
  });

  it('search finds the renamed tool by its new words and tags, not by its old name', async () => {
    const found: any = await client.callTool({ name: 'search_tools', arguments: { query: 'find orders placed by a customer', top_k: 1 } });
    assert.deepEqual(found.structuredContent.tools.map((tool: any) => tool.name), ['files__find_customer_orders']);
    assert.deepEqual(
      (({ score: _s, scores: _ss, ...tool }) => tool)(found.structuredContent.tools[0]),
      api.router.catalog.get('files__find_customer_orders')!.tool,
      'search returns the transformed definition',
    );
    const byTag = await api.post('/v1/tools/search', { query: 'purchases', mode: 'bm25' });
    assert.equal(byTag.body.results[0]?.name, 'files__find_customer_orders');
    const byOldName = await api.post('/v1/tools/search', { query: 'lookup records', mode: 'bm25', top_k: 20 });
    assert.equal(byOldName.status, 200);
    assert.ok(!byOldName.body.results.some((tool: any) => tool.name === 'files__find_customer_orders'), JSON.stringify(byOldName.body.results.map((t: any) => t.name)));
    const regex: any = await client.callTool({ name: 'search_tools', arguments: { query: 'regex:lookup|fail' } });
    assert.deepEqual(regex.structuredContent.tools, []);
  });

  it('call_tool sends the upstream its original argument names, the hidden value and defaults', async () => {
    const result: any = await client.callTool({ name: 'call_tool', arguments: { name: 'files__find_customer_orders', arguments: { customer: 'ann', limit: 7 } } });
    assert.equal(result.isError, undefined, textOf(result));
    assert.deepEqual(JSON.parse(textOf(result)), { q: 'ann', max_results: 7, api_mode: 'safe' });
  });

  it('direct calls and /mcp-rest/tools/call are mapped the same way', async () => {
    const direct = await client.callTool({ name: 'files__find_customer_orders', arguments: { customer: 'bob' } });
    assert.deepEqual(JSON.parse(textOf(direct)), { q: 'bob', max_results: 3, api_mode: 'safe' });
    const rest = await api.post('/mcp-rest/tools/call', { name: 'files__find_customer_orders', arguments: { customer: 'cy', limit: 1 } });
    assert.equal(rest.status, 200);
    assert.deepEqual(JSON.parse(textOf(rest.body)), { q: 'cy', max_results: 1, api_mode: 'safe' });
  });

  it('validates against the transformed schema and never lets a client override a hidden value', async () => {
    const missing: any = await client.callTool({ name: 'call_tool', arguments: { name: 'files__find_customer_orders', arguments: { q: 'old name' } } });
    assert.equal(missing.isError, true);
    assert.match(textOf(missing), /customer/);
    const sneaky: any = await client.callTool({ name: 'files__find_customer_orders', arguments: { customer: 'eve', api_mode: 'admin' } });
    if (sneaky.isError) assert.match(textOf(sneaky), /^invalid arguments/);
    else assert.deepEqual(JSON.parse(textOf(sneaky)), { q: 'eve', max_results: 3, api_mode: 'safe' });
  });

  it('the old name and hidden tools are not callable', async () => {
    for (const name of ['files__lookup_records', 'files__fail']) {
      await assert.rejects(
        client.callTool({ name, arguments: {} }),
        (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams && error.message.includes(`unknown tool "${name}"`),
      );
    }
  });

  it('a changed transform gives a different catalog hash with the same upstream', async () => {
    other = await startRouter({
      mcp: { servers: { files: stdioFixtureServer() }, transforms: { ...transforms, files__lookup_records: { ...lookupTransform, description: 'Find the orders of one customer' } } },
    });
    await other.router.mcp.upstreams.settled();
    const names = (router: RunningRouter) => router.router.catalog.snapshot().entries.map((entry) => entry.tool.name).sort();
    assert.deepEqual(names(other), names(api));
    assert.notEqual(other.router.catalog.snapshot().catalogHash, api.router.catalog.snapshot().catalogHash);
    await other.indexed();
    assert.equal(other.router.indexes.current?.catalogHash, other.router.catalog.snapshot().catalogHash, 'the changed catalog was indexed');
  });
});
