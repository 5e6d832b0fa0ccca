import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Client as ClientV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, LoggingMessageNotificationSchema, type LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startIdentityProvider, type IdentityProvider } from '../fixtures/identity-provider.js';
import { startOAuthFixture, type OAuthFixture } from '../fixtures/mcp/oauth-server.js';
import { ADMIN_KEY, call } from '../helpers/keys.js';
import { textOf, waitFor } from '../helpers/mcp.js';
import { REDIS_URL } from '../helpers/processes.js';
import { freePort } from '../helpers/redis-server.js';
import { closeListening } from '../helpers/router.js';

/**
 * The relay through per-user upstream connections (`auth: {type: oauth, perUser: true}`): a call goes out on its
 * caller's own connection (their grant), and what the upstream asks or logs during it must reach that caller exactly
 * as on the shared connection. Real parts: a real IdP's JWTs, the SDK's OAuth-protected server (whose `ask` tool
 * elicits and whose `chatty` tool logs, each naming the account of the token), sealed grants in Redis, real SDK clients
 * on both revisions.
 */

const SECRET = 'test-secret-key-for-oauth-0123456789';
const FAST = { reconnect: { initialMs: 50, maxMs: 400 }, pingIntervalMs: 0, startupWaitMs: 0, connectTimeoutMs: 10_000, callTimeoutMs: 15_000 };

interface Person {
  client: Client;
  asked: string[];
  logs: LoggingMessageNotification['params'][];
}

describe('per-user upstream connections relay elicitation and logging to the caller', () => {
  const prefix = `per-user-relay-${process.pid}-${Date.now()}`;
  const redis = new Redis(REDIS_URL);
  let idp: IdentityProvider;
  let upstream: OAuthFixture;
  let router: Toolrouter;
  let server: Server;
  let base: string;
  let alice: string;
  let bob: string;
  const people: Person[] = [];

  const approve = (link: string, user: string, key: string) => upstream.approve(link, user, { key });

  /** A user authorizes the upstream for themselves (the REST route hands out their authorization URL). */
  const authorize = async (token: string, user: string) => {
    const asked = await call(base, 'POST', '/mcp-rest/tools/call', { key: token, body: { name: 'gh__whoami', arguments: {} } });
    assert.equal(asked.body.error?.code, 'url_elicitation_required', JSON.stringify(asked.body));
    await approve(asked.body.error.authorization_url, user, token);
  };

  /** A 1.x SDK client on /mcp, signed in with `token`, that answers form elicitation with `name`. */
  const person = async (token: string, name: string): Promise<Person> => {
    const client = new Client({ name: `per-user-${name}`, version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    const who: Person = { client, asked: [], logs: [] };
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      who.asked.push(request.params.message);
      return { action: 'accept', content: { name } };
    });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void who.logs.push(notification.params));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    people.push(who);
    return who;
  };

  before(async () => {
    idp = await startIdentityProvider();
    upstream = await startOAuthFixture({ relayTools: true });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const config = loadConfig(
      { TOOLROUTER_SECRET_KEY: SECRET },
      {
        port,
        host: '127.0.0.1',
        adminKey: ADMIN_KEY,
        redisUrl: REDIS_URL,
        queue: { prefix },
        auth: { oauth: { issuer: idp.issuer, audience: `${base}/mcp` } },
        mcp: { ...FAST, search: true, servers: { gh: { url: upstream.url, auth: { type: 'oauth', perUser: true } } } },
      },
    );
    router = await createToolrouter(config, { log: createLogger('silent') });
    server = await listen(router);
    alice = await idp.mint({ sub: 'alice', aud: `${base}/mcp` }, { expiresInSeconds: 3_600 });
    bob = await idp.mint({ sub: 'bob', aud: `${base}/mcp` }, { expiresInSeconds: 3_600 });
    const admin = await call(base, 'POST', '/v1/mcp/servers/gh/authorize', { key: ADMIN_KEY });
    assert.equal(admin.status, 200, JSON.stringify(admin.body));
    await approve(admin.body.authorization_url, 'admin', ADMIN_KEY);
    await waitFor('gh connected', async () => (await call(base, 'GET', '/v1/mcp/servers', { key: ADMIN_KEY })).body.servers[0].state === 'connected', 15_000);
    await authorize(alice, 'alice');
    await authorize(bob, 'bob');
  });

  after(async () => {
    for (const who of people) await who.client.close().catch(() => {});
    await closeListening(router, server);
    await upstream?.close();
    await idp?.close();
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  test('2025-11-25: each user\'s elicitation comes from their own connection and reaches only them, directly and through call_tool', async () => {
    const a = await person(alice, 'Alice');
    const b = await person(bob, 'Bob');
    const [mine, theirs] = await Promise.all([
      a.client.callTool({ name: 'gh__ask', arguments: {} }),
      b.client.callTool({ name: 'call_tool', arguments: { name: 'gh__ask', arguments: {} } }),
    ]);
    // The upstream names the account of the token the call came with; the answer is the caller's own.
    assert.equal(textOf(mine), 'alice: hello Alice', JSON.stringify(mine));
    assert.equal(textOf(theirs), 'bob: hello Bob', JSON.stringify(theirs));
    assert.deepEqual(a.asked, ['alice: what is your name?']);
    assert.deepEqual(b.asked, ['bob: what is your name?']);
    assert.equal(router.mcp.upstreams.userConnectionCount('gh'), 2, 'the calls went out on the users\' own connections');
  });

  test('2025-11-25: a log message during a user\'s call reaches that user, namespaced by server', async () => {
    const a = people[0]!;
    const b = people[1]!;
    assert.equal(textOf(await a.client.callTool({ name: 'gh__chatty', arguments: {} })), 'done');
    await waitFor('alice got the log message', () => a.logs.length > 0, 5_000);
    assert.deepEqual(
      a.logs.map((log) => [log.level, log.logger, log.data]),
      [['info', 'gh/worker', 'working for alice']],
    );
    assert.deepEqual(b.logs, [], 'nothing reached bob');
  });

  test('2026-07-28: the user\'s elicitation is an input-required round answered by their v2 client', async () => {
    const modern = new ClientV2({ name: 'per-user-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { form: {} } } });
    const asked: string[] = [];
    modern.setRequestHandler('elicitation/create', async (request) => {
      asked.push(String((request.params as { message?: string }).message));
      return { action: 'accept', content: { name: 'Modern Alice' } };
    });
    const { StreamableHTTPClientTransport: HttpTransportV2 } = await import('@modelcontextprotocol/client');
    await modern.connect(new HttpTransportV2(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${alice}` } } }));
    try {
      const result = await modern.callTool({ name: 'gh__ask', arguments: {} });
      assert.equal(textOf(result), 'alice: hello Modern Alice', JSON.stringify(result));
      assert.deepEqual(asked, ['alice: what is your name?']);
    } finally {
      await modern.close();
    }
  });
});
