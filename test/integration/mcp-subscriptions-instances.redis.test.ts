/**
 * Issue 54: a 2025-11-25 session's resource subscription made through one instance, its update heard there, reaches
 * the session's event stream held by another instance (two `toolrouter serve` processes on the suite's Redis, one
 * prefix, each with its own features fixture over stdio). The client's GET stream and initialize go to the first
 * instance; subscribe and the call that makes the upstream send the update go to the second.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { textOf, waitFor } from '../helpers/mcp.js';
import { CliProcess } from '../helpers/ops-processes.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { REDIS_URL, writeConfig } from '../helpers/processes.js';

const FEATURES = { command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/features-server.ts')], cwd: REPO_ROOT };

describe('resource subscriptions across instances (Redis)', { timeout: 600_000 }, () => {
  const prefix = `trtest-subs-${randomUUID().slice(0, 8)}`;
  const instances: { process: CliProcess; url: string }[] = [];

  before(async () => {
    const config = writeConfig({ redisUrl: REDIS_URL, port: 0, queue: { prefix }, mcp: { search: false, callTimeoutMs: 30_000, servers: { feat: FEATURES } } });
    for (let i = 0; i < 2; i++) {
      const child = new CliProcess(['--config', config, 'serve']);
      instances.push({ process: child, url: '' });
      const line = await child.waitFor((l) => l.msg === 'toolrouter listening', 240_000);
      instances[i]!.url = `http://127.0.0.1:${String(line.port)}`;
    }
    for (const { url } of instances) {
      await waitFor('upstream connected', async () => {
        const { servers } = (await (await fetch(`${url}/v1/mcp/servers`)).json()) as { servers: { state: string }[] };
        return servers.length === 1 && servers.every((server) => server.state === 'connected');
      }, 180_000);
    }
  });

  after(async () => {
    await Promise.all(instances.map((instance) => instance.process.stop()));
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('subscribed through one instance, the update reaches the event stream held by the other', async () => {
    const [streamHolder, subscriber] = instances.map((instance) => instance.url) as [string, string];
    const routed: string[] = [];
    // By method: the session's stream (GET) and initialize on the first instance, everything else on the second.
    const route = (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const method = init?.method === 'POST' ? String((JSON.parse(String(init.body)) as { method?: string }).method) : 'GET';
      const base = method === 'GET' || method === 'initialize' || method === 'notifications/initialized' ? streamHolder : subscriber;
      routed.push(`${method}→${base === streamHolder ? 'first' : 'second'}`);
      return fetch(`${base}${url.pathname}${url.search}`, init);
    };
    const client = new Client({ name: 'subscriptions-across', version: '1.0.0' });
    const updates: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => void updates.push(notification.params.uri));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${streamHolder}/mcp`), { fetch: route as typeof fetch }));
    try {
      await waitFor('the event stream open on the first instance', () => routed.includes('GET→first'), 10_000);
      await client.subscribeResource({ uri: 'notes://items/5' });
      assert.equal(textOf(await client.callTool({ name: 'feat__touch', arguments: { uri: 'notes://items/5' } })), 'notified', 'the upstream of the second instance holds the subscription');
      await waitFor('the update on the stream held by the first instance', () => updates.length > 0, 15_000);
      assert.deepEqual(updates, ['notes://items/5']);
      assert.ok(routed.includes('resources/subscribe→second') && routed.includes('tools/call→second'), routed.join(', '));
    } finally {
      await client.close();
    }
  });
});
