import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ADMIN_KEY, generateKey } from '../helpers/keys.js';
import { waitFor } from '../helpers/mcp.js';
import { counter } from '../helpers/metrics.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';

const MODERN = '2026-07-28';
const PER_KEY = 4;
const TOTAL = 6;

/** A v2 SDK client pinned to the stateless revision, presenting `key`. */
async function modernClient(baseUrl: string, key: string): Promise<ClientV2> {
  const client = new ClientV2({ name: 'streams-test-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  await client.connect(new HttpTransportV2(new URL(`${baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

type Subscription = Awaited<ReturnType<ClientV2['listen']>>;

const listen = (client: ClientV2): Promise<Subscription> => client.listen({ toolsListChanged: true }, { timeout: 10_000 });

describe('caps on long-lived /mcp streams (2026 subscriptions/listen, 2025 GET event streams)', () => {
  let api: RunningRouter;
  const clients: { close(): Promise<void> }[] = [];
  const open = (kind: string) => counter(api, 'toolrouter_mcp_streams', { kind });
  const refused = (kind: string, limit: string) => counter(api, 'toolrouter_mcp_streams_refused_total', { kind, limit });

  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, catalog: { sources: { demo: fixtureTools() } }, mcp: { maxStreamsPerKey: PER_KEY, maxStreams: TOTAL } });
    await api.indexed();
  });

  after(async () => {
    for (const client of clients) await client.close().catch(() => {});
    await api?.close();
  });

  it('one key gets mcp.maxStreamsPerKey listen streams, then 429; others keep theirs up to mcp.maxStreams; the admin is not locked out', async () => {
    const flooder = await generateKey(api.url, {});
    const other = await generateKey(api.url, {});
    const a = await modernClient(api.url, flooder.key);
    const b = await modernClient(api.url, other.key);
    const admin = await modernClient(api.url, ADMIN_KEY);
    clients.push(a, b, admin);
    const baseline = await open('listen');

    const mine: Subscription[] = [];
    for (let i = 0; i < PER_KEY; i++) mine.push(await listen(a));
    assert.equal(await open('listen'), baseline + PER_KEY);
    // Many more from the same key: every one refused, none held.
    for (let i = 0; i < 20; i++) await assert.rejects(listen(a), (error: Error) => /429|Too many open MCP streams/.test(`${error.message} ${String((error as any).cause ?? '')}`));
    assert.equal(await refused('listen', 'key'), 20);
    assert.equal(await open('listen'), baseline + PER_KEY);

    // Another key still gets streams, up to the total for everyone but the admin.
    const theirs: Subscription[] = [];
    for (let i = 0; i < TOTAL - PER_KEY; i++) theirs.push(await listen(b));
    await assert.rejects(listen(b));
    assert.equal(await refused('listen', 'total'), 1);
    // The admin's streams do not count toward the total, so others cannot lock it out.
    const adminStream = await listen(admin);
    assert.equal(await open('listen'), baseline + TOTAL + 1);

    // A stream closed is given back: the key may open one again.
    await mine.pop()!.close();
    await waitFor('the closed stream released', async () => (await open('listen')) === baseline + TOTAL);
    mine.push(await listen(a));
    // Searches of other keys are served meanwhile.
    const search = await fetch(`${api.url}/v1/tools/search`, {
      method: 'POST',
      headers: { authorization: `Bearer ${other.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'send an email' }),
    });
    assert.equal(search.status, 200, await search.text());

    for (const subscription of [...mine, ...theirs, adminStream]) await subscription.close();
    await waitFor('every stream released', async () => (await open('listen')) === baseline);
  });

  it('2025 GET event streams count against the same per-key cap', async () => {
    const key = await generateKey(api.url, {});
    const modern = await modernClient(api.url, key.key);
    clients.push(modern);
    const held: Subscription[] = [];
    for (let i = 0; i < PER_KEY; i++) held.push(await listen(modern));
    const before = await refused('sse', 'key');

    // A 2025 client of the same key: its session opens, its GET event stream is refused, its calls still work.
    const legacy = new Client({ name: 'streams-test-v1', version: '1.0.0' });
    const errors: Error[] = [];
    legacy.onerror = (error) => errors.push(error);
    await legacy.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key.key}` } } }));
    clients.push(legacy);
    // The 1.x client may try the stream again once it is refused; each try is refused.
    await waitFor('the GET stream refused', async () => (await refused('sse', 'key')) > before);
    assert.ok(errors.some((error) => /Too Many Requests/.test(error.message)), errors.map((error) => error.message).join('; '));
    // The session itself works (no upstream servers here: its list is empty).
    assert.deepEqual((await legacy.listTools()).tools, []);

    // With a stream given back, a new session's GET stream is accepted.
    const listening = await open('listen');
    await held.pop()!.close();
    await waitFor('the listen stream released', async () => (await open('listen')) === listening - 1);
    const sseBefore = await open('sse');
    const second = new Client({ name: 'streams-test-v1b', version: '1.0.0' });
    await second.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key.key}` } } }));
    clients.push(second);
    await waitFor('the GET stream open', async () => (await open('sse')) === sseBefore + 1);
    for (const subscription of held) await subscription.close();
  });
});
