import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ClientConfigError, importClientConfigs, parseClientConfig } from '../../src/mcp/upstream/client-config.js';
import { mcpServerSchema } from '../../src/mcp/settings.js';
import { maskServer } from '../../src/mcp/server/server-routes.js';

describe('MCP client config files', () => {
  it('Claude Desktop: mcpServers with stdio command/args/env, ${VAR} from the environment', () => {
    const text = JSON.stringify({
      mcpServers: {
        filesystem: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '${HOME_DIR}/Desktop'], env: { TOKEN: '${GH_TOKEN}' } },
      },
    });
    const { servers, skipped } = parseClientConfig(text, '/x/claude_desktop_config.json', { HOME_DIR: '/home/ann', GH_TOKEN: 'ghp_secret' });
    assert.deepEqual(skipped, []);
    assert.deepEqual(servers, {
      filesystem: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/home/ann/Desktop'], env: { TOKEN: 'ghp_secret' } },
    });
  });

  it('Claude Code .mcp.json: type stdio | http | sse, url, headers, ${VAR:-default}', () => {
    const text = JSON.stringify({
      mcpServers: {
        local: { type: 'stdio', command: 'node', args: ['server.js'], env: {} },
        remote: { type: 'http', url: '${API_BASE:-https://api.example.com}/mcp', headers: { Authorization: 'Bearer ${API_KEY}' } },
        legacy: { type: 'sse', url: 'https://sse.example.com/sse' },
      },
    });
    const { servers, skipped } = parseClientConfig(text, '/p/.mcp.json', { API_KEY: 'k-123' });
    assert.deepEqual(skipped, []);
    assert.deepEqual(servers.local, { type: 'stdio', command: 'node', args: ['server.js'], env: {} });
    assert.deepEqual(servers.remote, { type: 'http', url: 'https://api.example.com/mcp', headers: { Authorization: 'Bearer k-123' } });
    assert.deepEqual(servers.legacy, { type: 'sse', url: 'https://sse.example.com/sse', headers: {} });
  });

  it('Cursor: url without a type is streamable HTTP; client-only keys are ignored; disabled: true is honoured', () => {
    const text = JSON.stringify({
      mcpServers: {
        docs: { url: 'https://docs.example.com/mcp', headers: { 'x-api-key': 'abc' }, autoApprove: ['read'] },
        off: { command: 'node', args: ['x.js'], disabled: true },
      },
    });
    const { servers, skipped } = parseClientConfig(text, '/u/.cursor/mcp.json', {});
    assert.deepEqual(servers, { docs: { url: 'https://docs.example.com/mcp', headers: { 'x-api-key': 'abc' } } });
    assert.deepEqual(skipped, [{ file: '/u/.cursor/mcp.json', server: 'off', reason: 'disabled: true', disabled: true }]);
  });

  it('VS Code mcp.json: servers, comments and trailing commas, ${workspaceFolder}; entries with inputs are skipped by name with the reason', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'toolrouter-vscode-'));
    mkdirSync(path.join(root, '.vscode'));
    const file = path.join(root, '.vscode', 'mcp.json');
    writeFileSync(
      file,
      `{
  // prompted in the editor
  "inputs": [{ "type": "promptString", "id": "api-key", "description": "API key", "password": true }],
  "servers": {
    "tasks": { "type": "stdio", "command": "node", "args": ["\${workspaceFolder}/server.js"], },
    "github": { "type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": { "Authorization": "Bearer \${input:api-key}" } },
    "from-env": { "type": "http", "url": "https://x.example.com/mcp", "headers": { "Authorization": "Bearer \${env:X_TOKEN}" } },
  },
}`,
    );
    const { servers, skipped } = importClientConfigs([file], { X_TOKEN: 't' });
    assert.deepEqual(servers.tasks, { type: 'stdio', command: 'node', args: [`${root}/server.js`], env: {} });
    assert.deepEqual(servers['from-env'], { type: 'http', url: 'https://x.example.com/mcp', headers: { Authorization: 'Bearer t' } });
    assert.equal(servers.github, undefined);
    assert.equal(skipped.length, 1);
    assert.equal(skipped[0]!.server, 'github');
    assert.match(skipped[0]!.reason, /\$\{input:api-key\}, a VS Code input prompted in the editor/);
  });

  it('unusable entries are reported by name with the reason; the rest load', () => {
    const text = JSON.stringify({
      mcpServers: {
        good: { command: 'node' },
        'has space': { command: 'node' },
        unset: { command: 'node', env: { TOKEN: '${NOT_SET_ANYWHERE}' } },
        nothing: { args: ['x'] },
        badurl: { url: 'not a url' },
        envfile: { type: 'stdio', command: 'node', envFile: '${workspaceFolder}/.env' },
      },
    });
    const { servers, skipped } = parseClientConfig(text, 'f.json', {});
    assert.deepEqual(Object.keys(servers), ['good']);
    const reasons = Object.fromEntries(skipped.map((entry) => [entry.server, entry.reason]));
    assert.match(reasons['has space']!, /1-64 characters/);
    assert.match(reasons.unset!, /environment variable NOT_SET_ANYWHERE is not set/);
    assert.match(reasons.nothing!, /neither "command" \(stdio\) nor "url" \(HTTP\)/);
    assert.match(reasons.badurl!, /url/);
    assert.match(reasons.envfile!, /envFile is not read/);
  });

  it('the entry that launches toolrouter itself is not imported (it would start itself without end)', () => {
    const text = JSON.stringify({
      mcpServers: {
        toolrouter: { command: 'toolrouter', args: ['stdio', '--mcp-config', '/x/claude_desktop_config.json'] },
        viaNpx: { command: 'npx', args: ['-y', 'toolrouter', 'stdio'] },
        checkout: { command: 'node', args: ['/src/toolrouter/bin/toolrouter.js', 'stdio'] },
        other: { command: 'node', args: ['server.js', 'stdio'] },
      },
    });
    const { servers, skipped } = parseClientConfig(text, 'f.json', {});
    assert.deepEqual(Object.keys(servers), ['other']);
    assert.deepEqual(skipped.map((entry) => entry.server), ['toolrouter', 'viaNpx', 'checkout']);
    assert.match(skipped[0]!.reason, /starts toolrouter itself/);
  });

  it('a file that cannot be used at all is an error naming it', () => {
    assert.throws(() => parseClientConfig('{"mcpServers": ', 'broken.json'), (error: Error) => error instanceof ClientConfigError && /broken\.json is not valid JSON/.test(error.message));
    assert.throws(() => parseClientConfig('{"other": {}}', 'empty.json'), /empty\.json has no servers: expected "mcpServers"/);
    assert.throws(() => importClientConfigs(['/nonexistent/mcp.json']), /cannot read MCP config \/nonexistent\/mcp\.json/);
  });

  it('a name already configured, or taken by an earlier file, is skipped', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'toolrouter-import-'));
    const first = path.join(dir, 'a.json');
    const second = path.join(dir, 'b.json');
    writeFileSync(first, JSON.stringify({ mcpServers: { one: { command: 'a' }, configured: { command: 'a' } } }));
    writeFileSync(second, JSON.stringify({ mcpServers: { one: { command: 'b' } } }));
    const { servers, skipped } = importClientConfigs([first, second], {}, ['configured']);
    assert.deepEqual(servers, { one: { command: 'a', args: [], env: {} } });
    assert.deepEqual(
      skipped.map(({ server, reason }) => `${server}: ${reason}`),
      ['configured: the name is already used by mcp.servers', `one: the name is already used by ${first}`],
    );
  });
});

describe('mcp.servers entries', () => {
  it('accept type and transport keys as clients write them', () => {
    assert.deepEqual(mcpServerSchema.parse({ type: 'http', url: 'https://a.example/mcp' }), { type: 'http', url: 'https://a.example/mcp', headers: {} });
    assert.deepEqual(mcpServerSchema.parse({ transport: 'streamable-http', url: 'https://a.example/mcp' }), { type: 'http', url: 'https://a.example/mcp', headers: {} });
    assert.deepEqual(mcpServerSchema.parse({ transport: 'sse', url: 'https://a.example/sse' }), { type: 'sse', url: 'https://a.example/sse', headers: {} });
    assert.deepEqual(mcpServerSchema.parse({ type: 'stdio', command: 'node' }), { type: 'stdio', command: 'node', args: [], env: {} });
  });

  it('refuse a type that does not fit the fields, and unknown keys', () => {
    assert.equal(mcpServerSchema.safeParse({ type: 'stdio', url: 'https://a.example/mcp' }).success, false);
    assert.equal(mcpServerSchema.safeParse({ type: 'websocket', url: 'https://a.example/mcp' }).success, false);
    assert.equal(mcpServerSchema.safeParse({ url: 'https://a.example/mcp', token: 'x' }).success, false);
  });

  it('masked for display: every env and header value, and a password in the URL', () => {
    assert.deepEqual(maskServer({ url: 'https://user:pw@a.example/mcp', headers: { Authorization: 'Bearer s3cret' } }), {
      url: 'https://user:***@a.example/mcp',
      headers: { Authorization: '***' },
    });
    assert.deepEqual(maskServer({ command: 'node', env: { API_TOKEN: 'abc' } }), { command: 'node', env: { API_TOKEN: '***' } });
  });
});
