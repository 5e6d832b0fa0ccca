import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_KEY, generateKey, mcpClientWithKey } from '../helpers/keys.js';
import { waitFor } from '../helpers/mcp.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/** Issue 21, case 5: one key's flood of bare /mcp sessions must not lock other keys or the admin out. */

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'flood', version: '1' } },
};

async function bareSession(url: string, key: string): Promise<number> {
  const response = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify(initialize),
  });
  await response.text();
  return response.status;
}

describe('/mcp session fairness (case 5)', () => {
  let api: RunningRouter;

  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, mcp: { search: true, maxSessions: 40, maxSessionsPerKey: 10, unusedSessionIdleMs: 3_000 } });
  });

  after(async () => {
    await api?.close();
  });

  it('caps sessions per key, leaves room for other keys and the admin, and closes sessions never used', async () => {
    const flooder = await generateKey(api.url, {});
    const other = await generateKey(api.url, {});
    const statuses: number[] = [];
    // 60 initializes (more than the global cap of 40) in bursts of 20 at once.
    for (let burst = 0; burst < 3; burst++) statuses.push(...(await Promise.all(Array.from({ length: 20 }, () => bareSession(api.url, flooder.key)))));
    assert.equal(statuses.filter((status) => status === 200).length, 10);
    assert.equal(statuses.filter((status) => status === 429).length, 50);
    assert.equal(api.router.mcp.http.sessions(), 10);

    // Another key and the admin still get sessions that work.
    const client = await mcpClientWithKey(api.url, other.key);
    const tools = await client.listTools();
    assert.ok(tools.tools.some((tool) => tool.name === 'search_tools'));
    const adminClient = await mcpClientWithKey(api.url, ADMIN_KEY);
    await adminClient.listTools();

    // The flooder's bare sessions are closed after the short idle expiry; used sessions stay.
    await waitFor('bare sessions to be closed', async () => (await bareSession(api.url, flooder.key)) === 200, 10_000);
    await client.listTools();
    await client.close();
    await adminClient.close();
  });
});
