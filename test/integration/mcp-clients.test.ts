/**
 * The docs' client snippets (docs/clients.md, "Pointing clients at it"), run as written: each JSON snippet and `claude mcp add` line
 * is read from the docs, and the command line or URL it registers is driven with an SDK client (only the port, the key,
 * the servers file's path and the `toolrouter` command — here the CLI from source — are the test's). Also: `toolrouter
 * stdio` with no upstream says so on stderr and in search_tools, without naming an HTTP endpoint.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { parse as parseJsonc } from 'jsonc-parser';
import { NO_SERVERS } from '../../src/mcp/gateway/guidance.js';
import { readDocs } from '../helpers/docs.js';
import { CLI } from '../helpers/ops-processes.js';
import { textOf } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const KEY = 'readme-snippet-key-0123456789';

/** The fenced block after `<!-- client: name -->` in the docs (README.md and docs/). */
function snippet(name: string): string {
  const docs = readDocs();
  const match = new RegExp(`<!-- client: ${name} -->\\n\`\`\`\\w+\\n([\\s\\S]*?)\`\`\``).exec(docs);
  assert.ok(match, `the docs have the ${name} snippet`);
  return match[1]!;
}

/** The environment a client would give the process: the developer's toolrouter settings left out. */
function clientEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !/^(TOOLROUTER_CONFIG|REDIS_URL|ADMIN_KEY|PORT|HOST)$/.test(name)) env[name] = value;
  return { ...env, LOG_LEVEL: 'warn' };
}

/** Runs `toolrouter <args>` as the client would (the CLI from source), with an SDK client on its stdio. */
async function stdioClient(command: string, args: string[], cwd: string): Promise<{ client: Client; stderr: () => string }> {
  assert.equal(command, 'toolrouter');
  const transport = new StdioClientTransport({ command: process.execPath, args: [...CLI, ...args], cwd, env: clientEnv(), stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const client = new Client({ name: 'readme-client', version: '1.0.0' });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

async function httpClient(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'readme-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

describe('README client snippets, run as written', () => {
  let dir: string;
  let serversFile: string;
  let api: RunningRouter;
  /** README URLs name the default port; the test's server has its own. */
  const local = (url: string) => url.replace('http://127.0.0.1:8080', api.url);

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-clients-'));
    // The user's servers, in Claude Desktop's format (a copy of their claude_desktop_config.json).
    serversFile = path.join(dir, 'servers.json');
    // tsx by absolute URL: toolrouter stdio runs in whatever folder the client starts it in.
    const files = { command: process.execPath, args: ['--import', import.meta.resolve('tsx'), path.join(REPO_ROOT, 'test/fixtures/mcp/stdio-server.ts')] };
    writeFileSync(serversFile, JSON.stringify({ mcpServers: { files } }));
    api = await startRouter({ adminKey: KEY, mcp: { import: [serversFile] } });
    await api.router.mcp.upstreams.settled();
  });

  after(async () => {
    await api?.close();
  });

  /** The user's tools are reachable through the client's one server. */
  async function usesServers(client: Client): Promise<void> {
    try {
      // A client lists first (which waits, bounded, for the upstreams to connect), then calls.
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      assert.ok(names.includes('files__echo') || names.includes('search_tools'), names.join());
      const result = await client.callTool({ name: 'files__echo', arguments: { text: 'through toolrouter' } });
      assert.equal(textOf(result), 'through toolrouter');
    } finally {
      await client.close();
    }
  }

  it('Claude Desktop: the stdio entry, --mcp-config pointing at the servers file', async () => {
    const entry = JSON.parse(snippet('claude-desktop')).mcpServers.toolrouter as { command: string; args: string[] };
    const args = entry.args.map((arg) => (arg.endsWith('servers.json') ? serversFile : arg));
    assert.notDeepEqual(args, entry.args, 'the snippet names a servers file');
    const { client } = await stdioClient(entry.command, args, tmpdir());
    await usesServers(client);
  });

  it('Claude Code: `claude mcp add --transport http` with the key header', async () => {
    const line = snippet('claude-code').split('\n').find((text) => text.includes('--transport http'))!;
    const match = /--transport http toolrouter (\S+) --header "([^:]+): ([^"]+)"/.exec(line);
    assert.ok(match, line);
    const [, url, header, value] = match;
    const client = await httpClient(local(url!), { [header!]: value!.replace('$TOOLROUTER_KEY', KEY) });
    await usesServers(client);
    // The header is what lets it in.
    const refused = await fetch(local(url!), { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    assert.equal(refused.status, 401);
  });

  it('Claude Code: `claude mcp add --transport stdio` runs toolrouter stdio with the servers file', async () => {
    const line = snippet('claude-code').split('\n').find((text) => text.includes('--transport stdio'))!;
    const [command, ...args] = line.split(' -- ')[1]!.trim().split(/\s+/);
    // Relative to the project folder Claude Code runs it in.
    assert.ok(args.includes('servers.json'), line);
    const { client } = await stdioClient(command!, args, dir);
    await usesServers(client);
  });

  for (const [name, format] of [
    ['cursor', 'mcpServers'],
    ['vscode', 'servers'],
  ] as const) {
    it(`${name === 'cursor' ? 'Cursor' : 'VS Code'}: the HTTP entry with its key header`, async () => {
      const entry = (parseJsonc(snippet(name)) as Record<string, Record<string, { url: string; headers: Record<string, string> }>>)[format]!.toolrouter!;
      const headers = Object.fromEntries(Object.entries(entry.headers).map(([header, value]) => [header, value.replace(/\$\{(env:TOOLROUTER_KEY|input:toolrouter-key)\}/, KEY)]));
      assert.equal(headers.Authorization, `Bearer ${KEY}`);
      await usesServers(await httpClient(local(entry.url), headers));
    });
  }
});

describe('toolrouter stdio with no upstream', () => {
  it('says so in one stderr line and in search_tools, naming --mcp-config and no HTTP endpoint', async () => {
    const { client, stderr } = await stdioClient('toolrouter', ['stdio'], tmpdir());
    try {
      const result: any = await client.callTool({ name: 'search_tools', arguments: { query: 'send an email' } });
      assert.equal(result.isError, true);
      assert.equal(textOf(result), NO_SERVERS);
      assert.match(NO_SERVERS, /--mcp-config FILE/);
      const plain = stderr()
        .split('\n')
        .filter((line) => line.startsWith('toolrouter stdio:'));
      assert.deepEqual(plain, [`toolrouter stdio: ${NO_SERVERS}`]);
      for (const text of [stderr(), JSON.stringify(result)]) assert.doesNotMatch(text, /\/v1\/|https?:\/\/|\/mcp\b/);
    } finally {
      await client.close();
    }
  });
});
