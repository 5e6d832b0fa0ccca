import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema, type LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';
import { startModernHttpFixture, type ModernHttpFixture } from '../fixtures/mcp/modern-server.js';
import { startRelayHttp, type RelayHttp } from '../fixtures/mcp/relay-server.js';
import { ADMIN_KEY, generateKey } from '../helpers/keys.js';
import { textOf, waitFor } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

const relayStdio = () => ({ command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/relay-server.ts')], cwd: REPO_ROOT });

interface Listener {
  client: Client;
  logs: LoggingMessageNotification['params'][];
}

async function listener(url: string, key: string, name: string): Promise<Listener> {
  const client = new Client({ name: `levels-${name}`, version: '1.0.0' });
  const logs: LoggingMessageNotification['params'][] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void logs.push(notification.params));
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return { client, logs };
}

/**
 * logging/setLevel reaches upstreams: a 2025-era connection (shared by every session) is told the most verbose level
 * any live session asked for, and each session still gets only what it asked for; a 2026-07-28 upstream gets each
 * call's own level in the request's _meta. Real parts: the relay fixture over HTTP and stdio (its `levels` tool says
 * what it was told), the v2 SDK's server over 2026-07-28 (its log helper filters by the request's level), SDK clients.
 */
describe('logging/setLevel forwarded to upstreams', () => {
  let api: RunningRouter;
  let web: RelayHttp;
  let modern: ModernHttpFixture;
  let quiet: Listener;
  let loud: Listener;
  let silent: Listener;

  const levelsOf = async (who: Listener, server: string) => textOf(await who.client.callTool({ name: `${server}__levels`, arguments: {} }));
  /** setLevel is forwarded as the client's request is answered; the upstream's own answer may trail it a little. */
  const told = (server: string, expected: string) => waitFor(`${server} says "${expected}"`, async () => (await levelsOf(quiet, server)) === expected, 10_000);

  before(async () => {
    web = await startRelayHttp();
    modern = await startModernHttpFixture();
    api = await startRouter({ adminKey: ADMIN_KEY, mcp: { search: false, callTimeoutMs: 15_000, servers: { web: { url: web.url }, st: relayStdio(), mod: { url: modern.url } } } });
    await waitFor('upstreams connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 20_000);
    quiet = await listener(api.url, (await generateKey(api.url, {})).key, 'quiet');
    loud = await listener(api.url, (await generateKey(api.url, {})).key, 'loud');
    silent = await listener(api.url, (await generateKey(api.url, {})).key, 'silent');
  });

  after(async () => {
    for (const who of [quiet, loud, silent]) await who?.client.close().catch(() => {});
    await api?.close();
    await web?.close();
    await modern?.close();
  });

  it('nothing is sent before a session sets a level; then the most verbose level any session wants', async () => {
    assert.equal(await levelsOf(quiet, 'web'), 'levels: (none)');
    await quiet.client.setLoggingLevel('warning');
    await told('web', 'levels: warning');
    await told('st', 'levels: warning');
    await loud.client.setLoggingLevel('debug');
    await told('web', 'levels: warning, debug');
    await told('st', 'levels: warning, debug');
    // A less verbose level than the one forwarded changes nothing upstream.
    await silent.client.setLoggingLevel('error');
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(await levelsOf(quiet, 'st'), 'levels: warning, debug');
    assert.equal(await levelsOf(quiet, 'web'), 'levels: warning, debug');
    silent.logs.length = 0;
  });

  it('each session still gets only the messages at or above its own level (2025-era upstream)', async () => {
    await quiet.client.callTool({ name: 'web__chatty', arguments: {} });
    await loud.client.callTool({ name: 'web__chatty', arguments: {} });
    await waitFor('loud session got its three messages', () => loud.logs.length === 3, 5_000);
    assert.deepEqual(
      quiet.logs.map((log) => [log.level, log.logger]),
      [['warning', 'web/worker']],
    );
    assert.deepEqual(
      loud.logs.map((log) => log.level),
      ['debug', 'info', 'warning'],
    );
  });

  it('a 2026-07-28 upstream gets each call\'s own level; a session without one gets none', async () => {
    quiet.logs.length = 0;
    loud.logs.length = 0;
    assert.equal(textOf(await quiet.client.callTool({ name: 'mod__log_work', arguments: {} })), 'logged at warning');
    assert.equal(textOf(await loud.client.callTool({ name: 'mod__log_work', arguments: {} })), 'logged at debug');
    await waitFor('loud session got the modern upstream\'s messages', () => loud.logs.length === 3, 5_000);
    assert.deepEqual(
      quiet.logs.map((log) => [log.level, log.logger, log.data]),
      [['warning', 'mod/worker', 'warning message']],
    );
    assert.deepEqual(
      loud.logs.map((log) => log.level),
      ['debug', 'info', 'warning'],
    );
    const fresh = await listener(api.url, (await generateKey(api.url, {})).key, 'fresh');
    try {
      assert.equal(textOf(await fresh.client.callTool({ name: 'mod__log_work', arguments: {} })), 'logged at no level');
    } finally {
      await fresh.client.close();
    }
  });

  it('when the most verbose session goes, upstreams are raised to what the others want; a server added later is told too', async () => {
    await (loud.client.transport as StreamableHTTPClientTransport).terminateSession();
    await loud.client.close();
    await told('st', 'levels: warning, debug, warning');
    await told('web', 'levels: warning, debug, warning');
    await api.router.mcp.upstreams.put('late', relayStdio());
    await waitFor('late connected', () => api.router.mcp.upstreams.statusOf('late')?.state === 'connected', 20_000);
    await told('late', 'levels: warning');
  });
});
