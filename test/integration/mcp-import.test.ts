/**
 * MCP client config files as users have them (Claude Code `.mcp.json`, Claude Desktop, Cursor, VS Code), read with
 * mcp.import: fixture servers of both revisions over stdio, streamable HTTP and legacy SSE, served unchanged.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/http-server.js';
import { startModernHttpFixture, type ModernHttpFixture } from '../fixtures/mcp/modern-server.js';
import { startSseFixture, type SseFixture } from '../fixtures/mcp/sse-server.js';
import { stdioFixtureServer, textOf } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const FAILING = [process.execPath, '--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/failing-server.ts')] as const;
/** tsx by absolute URL: this server runs in the VS Code workspace folder, outside the repository. */
const MODERN_STDIO = ['--import', import.meta.resolve('tsx'), path.join(REPO_ROOT, 'test/fixtures/mcp/modern-server.ts')];

/** A server's own tools/list, through a plain SDK client: what toolrouter must serve unchanged (under prefixed names). */
async function ownTools(transport: StdioClientTransport | StreamableHTTPClientTransport): Promise<Tool[]> {
  const client = new Client({ name: 'direct', version: '1.0.0' });
  await client.connect(transport);
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  await client.close();
  return tools;
}

describe('mcp.import: a Claude Code .mcp.json with type keys', () => {
  let dir: string;
  let tracker: HttpFixture;
  let modern: ModernHttpFixture;
  let sse: SseFixture;
  let api: RunningRouter;
  let client: Client;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-import-'));
    [tracker, modern, sse] = await Promise.all([startHttpFixture(), startModernHttpFixture(), startSseFixture()]);
    const stdio = stdioFixtureServer();
    // As `claude mcp add` writes it (Claude Code), with a variable and a default.
    writeFileSync(
      path.join(dir, '.mcp.json'),
      JSON.stringify({
        mcpServers: {
          files: { type: 'stdio', command: stdio.command, args: stdio.args, env: { FIXTURE_MODE: '${FIXTURE_MODE:-plain}' } },
          tracker: { type: 'http', url: tracker.url, headers: { 'x-team': '${TEAM_NAME:-core}' } },
          weather: { type: 'http', url: modern.url },
          legacy: { type: 'sse', url: sse.url },
          broken: { type: 'stdio', command: FAILING[0], args: FAILING.slice(1), cwd: REPO_ROOT },
          later: { command: 'node', disabled: true },
        },
      }),
    );
    api = await startRouter({ mcp: { import: [path.join(dir, '.mcp.json')], search: false, reconnect: { initialMs: 60_000, maxMs: 60_000 } } });
    await api.router.mcp.upstreams.settled();
    client = new Client({ name: 'import-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`)));
  });

  after(async () => {
    await client?.close();
    await api?.close();
    await Promise.all([tracker?.close(), modern?.close(), sse?.close()]);
  });

  it('connects every usable entry, each through its transport, with the revision it offers', async () => {
    const { body } = await api.request('GET', '/v1/mcp/servers');
    const byName = new Map<string, any>(body.servers.map((server: any) => [server.name, server]));
    assert.deepEqual([...byName.keys()].sort(), ['broken', 'files', 'legacy', 'tracker', 'weather']);
    for (const name of ['files', 'tracker', 'weather', 'legacy']) assert.equal(byName.get(name).state, 'connected', `${name}: ${byName.get(name).lastError}`);
    assert.equal(byName.get('files').transport, 'stdio');
    assert.equal(byName.get('legacy').transport, 'sse');
    assert.equal(byName.get('weather').revision, '2026-07-28');
    assert.equal(byName.get('tracker').revision, '2025-11-25');
    for (const server of byName.values()) assert.equal(server.origin, 'import');
  });

  it('serves each server\'s tools unchanged (prefixed names, same descriptions and schemas)', async () => {
    const listed: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      listed.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    const byName = new Map(listed.map((tool) => [tool.name, tool]));
    const stdio = stdioFixtureServer();
    const own = {
      files: await ownTools(new StdioClientTransport({ command: stdio.command, args: stdio.args, cwd: stdio.cwd })),
      tracker: await ownTools(new StreamableHTTPClientTransport(new URL(tracker.url))),
      weather: await ownTools(new StreamableHTTPClientTransport(new URL(modern.url))),
    };
    for (const [server, tools] of Object.entries(own)) {
      assert.ok(tools.length > 0, server);
      for (const tool of tools) {
        const served = byName.get(`${server}__${tool.name}`);
        assert.ok(served, `${server}__${tool.name} is served`);
        assert.equal(served.description, tool.description);
        assert.deepEqual(served.inputSchema, tool.inputSchema);
      }
    }
    assert.ok(byName.has('legacy__ping_legacy'));
  });

  it('calls reach each server; variables were expanded (header from the default)', async () => {
    assert.equal(textOf(await client.callTool({ name: 'files__echo', arguments: { text: 'hi' } })), 'hi');
    assert.equal(textOf(await client.callTool({ name: 'legacy__ping_legacy', arguments: { text: 'old' } })), 'pong: old');
    const whoami = JSON.parse(textOf(await client.callTool({ name: 'tracker__whoami', arguments: {} })));
    assert.equal(whoami['x-team'], 'core');
    const forecast: any = await client.callTool({ name: 'weather__forecast', arguments: { city: 'Oslo' } });
    assert.notEqual(forecast.isError, true);
  });

  it('a server that fails to start has one readable line: what happened and its stderr once, no SDK internals', async () => {
    const { body } = await api.request('GET', '/v1/mcp/servers');
    const broken = body.servers.find((server: any) => server.name === 'broken');
    assert.equal(broken.state, 'down');
    assert.equal(broken.lastError, 'the server process exited before answering (stderr: missing API_TOKEN env var)');
  });
});

describe('mcp.import: Claude Desktop, Cursor and VS Code files together', () => {
  it('each file\'s servers load; the unusable VS Code entry is reported by name and the rest load', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-import-'));
    const tracker = await startHttpFixture();
    const stdio = stdioFixtureServer();
    const desktop = path.join(dir, 'claude_desktop_config.json');
    writeFileSync(desktop, JSON.stringify({ mcpServers: { files: { command: stdio.command, args: stdio.args } } }));
    const cursor = path.join(dir, 'cursor-mcp.json');
    writeFileSync(cursor, JSON.stringify({ mcpServers: { tracker: { url: tracker.url } } }));
    mkdirSync(path.join(dir, '.vscode'));
    const vscode = path.join(dir, '.vscode', 'mcp.json');
    writeFileSync(
      vscode,
      `{ // VS Code
  "inputs": [{ "type": "promptString", "id": "key", "password": true }],
  "servers": {
    "weather": { "type": "stdio", "command": "${process.execPath}", "args": ${JSON.stringify(MODERN_STDIO)}, "cwd": "\${workspaceFolder}" },
    "prompted": { "type": "http", "url": "${tracker.url}", "headers": { "Authorization": "Bearer \${input:key}" } },
  },
}`,
    );
    const api = await startRouter({ mcp: { import: [desktop, cursor, vscode], search: false } });
    try {
      await api.router.mcp.upstreams.settled();
      const states = Object.fromEntries(api.router.mcp.upstreams.status().map((server) => [server.name, server.state]));
      assert.deepEqual(states, { files: 'connected', tracker: 'connected', weather: 'connected' });
      assert.deepEqual(
        api.router.mcp.imported.skipped.map(({ server, reason }) => [server, reason.split(',')[0]]),
        [['prompted', 'uses ${input:key}']],
      );
    } finally {
      await api.close();
      await tracker.close();
    }
  });
});
