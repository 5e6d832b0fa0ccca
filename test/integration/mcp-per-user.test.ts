import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startIdentityProvider, type IdentityProvider } from '../fixtures/identity-provider.js';
import { startOAuthFixture, type OAuthFixture } from '../fixtures/mcp/oauth-server.js';
import { ADMIN_KEY, call, generateKey, mcpClientWithKey, type Reply } from '../helpers/keys.js';
import { waitFor } from '../helpers/mcp.js';
import { REDIS_URL } from '../helpers/processes.js';
import { freePort } from '../helpers/redis-server.js';
import { closeListening } from '../helpers/router.js';

/**
 * Per-user upstream grants (`auth: {type: oauth, perUser: true}`), with real parts: users signed in with JWTs of a
 * real IdP (test/fixtures/identity-provider.ts), the SDK's OAuth-protected MCP server as the upstream (its whoami tool
 * reports the account the token was granted by), grants sealed in a real Redis, real MCP SDK clients. Alice's and bob's
 * calls each act with their own grant; a user without one is sent the authorization URL (-32042), never anyone's token.
 */

const SECRET = 'test-secret-key-for-oauth-0123456789';
const FAST = { reconnect: { initialMs: 50, maxMs: 400 }, pingIntervalMs: 0, startupWaitMs: 0, connectTimeoutMs: 10_000 };

describe('per-user upstream grants', () => {
  const logs: string[] = [];
  const responses: string[] = [];
  const prefix = `per-user-${process.pid}-${Date.now()}`;
  const redis = new Redis(REDIS_URL);
  let idp: IdentityProvider;
  let upstream: OAuthFixture;
  let router: Toolrouter;
  let server: Server;
  let base: string;
  let alice: string;
  let bob: string;

  const record = async (method: string, route: string, options: { key?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Reply> => {
    const reply = await call(base, method, route, options);
    responses.push(typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body));
    return reply;
  };
  const whoami = (key: string, headers: Record<string, string> = {}) => record('POST', '/mcp-rest/tools/call', { key, headers, body: { name: 'gh__whoami', arguments: {} } });
  const userOf = (reply: Reply) => JSON.parse(reply.body.content[0].text).user as string;
  const pick = ({ user, tenant }: { user?: string; tenant?: string }) => ({ user, ...(tenant ? { tenant } : {}) });

  /**
   * The user's browser: passes toolrouter's connect page with `key` (the credential that started the flow), is signed in
   * at the upstream's authorization server as `user`, approves and comes back to toolrouter.
   */
  const approve = async (link: string, user: string, key: string) => {
    assert.ok(link.startsWith(`${base}/oauth/connect/`), link);
    const { callback, page } = await upstream.approve(link, user, { key });
    assert.ok(callback.startsWith(`${base}/oauth/callback?`), callback);
    responses.push(page);
    return page;
  };

  before(async () => {
    idp = await startIdentityProvider();
    upstream = await startOAuthFixture();
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
        mcp: { ...FAST, search: false, servers: { gh: { url: upstream.url, auth: { type: 'oauth', perUser: true }, passthroughHeaders: ['x-tenant'] } }, oauth: { revocationTimeoutMs: 1_000 } },
      },
    );
    const sink = new Writable({ write: (chunk, _encoding, done) => (logs.push(String(chunk)), done()) });
    router = await createToolrouter(config, { log: createLogger('debug', sink) });
    server = await listen(router);
    alice = await idp.mint({ sub: 'alice', aud: `${base}/mcp` }, { expiresInSeconds: 3_600 });
    bob = await idp.mint({ sub: 'bob', aud: `${base}/mcp` }, { expiresInSeconds: 3_600 });
  });

  after(async () => {
    await closeListening(router, server);
    await upstream?.close();
    await idp?.close();
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  test('the admin\'s grant lists the tools, and the admin\'s calls act as the admin', async () => {
    const reply = await record('POST', '/v1/mcp/servers/gh/authorize', { key: ADMIN_KEY });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    await approve(reply.body.authorization_url, 'admin', ADMIN_KEY);
    await waitFor('gh connected', async () => (await record('GET', '/v1/mcp/servers', { key: ADMIN_KEY })).body.servers[0].state === 'connected', 15_000);
    const listed = await record('GET', '/mcp-rest/tools/list', { key: alice });
    assert.deepEqual((listed.body.tools as any[]).map((tool) => tool.name).sort(), ['gh__list_repos', 'gh__whoami']);
    assert.equal(userOf(await whoami(ADMIN_KEY)), 'admin');
  });

  test('alice without a grant: -32042 with the authorization URL on MCP, the URL in the REST error; nothing sent upstream', async () => {
    const before = upstream.counts().mcpRequests;
    const client = await mcpClientWithKey(base, alice);
    try {
      const error = await client.callTool({ name: 'gh__whoami', arguments: {} }).then(
        () => assert.fail('the call went through without alice\'s grant'),
        (caught: unknown) => caught,
      );
      assert.ok(error instanceof McpError, String(error));
      assert.equal(error.code, -32042);
      const elicitations = (error.data as { elicitations: { mode: string; url: string; elicitationId: string }[] }).elicitations;
      assert.equal(elicitations.length, 1);
      assert.equal(elicitations[0]!.mode, 'url');
      assert.ok(elicitations[0]!.elicitationId);
      assert.ok(elicitations[0]!.url.startsWith(`${base}/oauth/connect/`), 'toolrouter\'s connect link, not the upstream\'s URL');
    } finally {
      await client.close();
    }
    const rest = await whoami(alice);
    assert.equal(rest.status, 403, JSON.stringify(rest.body));
    assert.equal(rest.body.error.code, 'url_elicitation_required');
    assert.ok(rest.body.error.authorization_url.startsWith(`${base}/oauth/connect/`), rest.body.error.authorization_url);
    assert.equal(upstream.counts().mcpRequests, before, 'no request went upstream for alice');
  });

  test('after alice authorizes, her calls act as her; bob is sent his own URL, never alice\'s token', async () => {
    const asked = await whoami(alice);
    const page = await approve(asked.body.error.authorization_url, 'alice', alice);
    assert.match(page, /now act as your account/);
    const mine = await whoami(alice);
    assert.equal(mine.status, 200, JSON.stringify(mine.body));
    assert.equal(userOf(mine), 'alice');

    const bobs = await whoami(bob);
    assert.equal(bobs.status, 403, JSON.stringify(bobs.body));
    assert.equal(bobs.body.error.code, 'url_elicitation_required');
    await approve(bobs.body.error.authorization_url, 'bob', bob);
    assert.equal(userOf(await whoami(bob)), 'bob');
    assert.equal(userOf(await whoami(alice)), 'alice', 'alice still acts as alice');
    assert.equal(userOf(await whoami(ADMIN_KEY)), 'admin', 'the admin still acts as the admin');
    assert.equal(router.mcp.upstreams.userConnectionCount('gh'), 2, 'one upstream connection per user');
    assert.equal(upstream.counts().registrations, 1, 'users share the client registered for the server');

    // Through /mcp too, with a real SDK client signed in as bob.
    const client = await mcpClientWithKey(base, bob);
    try {
      const result = await client.callTool({ name: 'gh__whoami', arguments: {} });
      assert.equal(JSON.parse((result.content as { text: string }[])[0]!.text).user, 'bob');
    } finally {
      await client.close();
    }
  });

  test('passthroughHeaders go with that request\'s call on the user\'s own connection, on top of their grant; they do not stand in for one', async () => {
    const tenant = { 'x-toolrouter-upstream-gh-x-tenant': 'tenant-of-alice-42' };
    const withHeader = await whoami(alice, tenant);
    assert.equal(withHeader.status, 200, JSON.stringify(withHeader.body));
    assert.deepEqual(pick(JSON.parse(withHeader.body.content[0].text)), { user: 'alice', tenant: 'tenant-of-alice-42' });
    assert.deepEqual(pick(JSON.parse((await whoami(alice)).body.content[0].text)), { user: 'alice' }, 'the next request without it sends none');
    const { key } = await generateKey(base, {});
    const before = upstream.counts().mcpRequests;
    assert.equal((await whoami(key, tenant)).body.error?.code, 'url_elicitation_required', 'a header is no grant');
    assert.equal(upstream.counts().mcpRequests, before, 'nothing was sent for the caller without a grant');
    assert.ok(!logs.join('\n').includes('tenant-of-alice-42'), 'never logged');
  });

  test('a key is a subject of its own; an assert_user key acts for the user it names, other keys may not name one', async () => {
    const { key } = await generateKey(base, {});
    const own = await whoami(key);
    assert.equal(own.body.error?.code, 'url_elicitation_required', JSON.stringify(own.body));
    const service = (await generateKey(base, { assert_user: true })).key;
    const asAlice = await whoami(service, { 'x-toolrouter-user': 'alice' });
    assert.equal(asAlice.status, 200, JSON.stringify(asAlice.body));
    assert.equal(userOf(asAlice), 'alice');
    const refused = await whoami(key, { 'x-toolrouter-user': 'alice' });
    assert.equal(refused.status, 403);
    assert.match(refused.body.error.message, /assert_user/);
  });

  test('the admin lists and revokes grants; a user revokes their own', async () => {
    const listed = await record('GET', '/v1/mcp/servers/gh/grants', { key: ADMIN_KEY });
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.deepEqual((listed.body.grants as any[]).map((grant) => grant.subject), ['user:alice', 'user:bob']);
    assert.equal((await record('GET', '/v1/mcp/servers/gh/grants', { key: alice })).status, 403, 'users do not list grants');

    const own = await record('DELETE', '/v1/mcp/servers/gh/grant', { key: alice });
    assert.equal(own.status, 200, JSON.stringify(own.body));
    assert.deepEqual(own.body, { revoked: true, upstream_revocation: 'revoked' });
    // RFC 7009 at the authorization server's advertised revocation_endpoint: alice's refresh token, then her access
    // token, authenticated as the client they were issued to.
    assert.deepEqual(upstream.revocations().map(({ kind, user, hint }) => ({ kind, user, hint })), [
      { kind: 'refresh', user: 'alice', hint: 'refresh_token' },
      { kind: 'access', user: 'alice', hint: 'access_token' },
    ]);
    assert.equal((await whoami(alice)).body.error?.code, 'url_elicitation_required', 'alice must authorize again');
    assert.equal(userOf(await whoami(bob)), 'bob', 'bob is untouched');

    // An authorization server that does not answer holds the revoke's answer for revocationTimeoutMs (1 s) at most.
    const release = upstream.holdRevocations();
    const started = Date.now();
    const byAdmin = await record('DELETE', `/v1/mcp/servers/gh/grants/${encodeURIComponent('user:bob')}`, { key: ADMIN_KEY });
    const waited = Date.now() - started;
    release();
    assert.deepEqual(byAdmin.body, { revoked: true, upstream_revocation: 'failed' });
    assert.ok(waited < 5_000, `the revoke answered after ${waited} ms`);
    assert.ok(logs.some((line) => line.includes('"outcome":"failed"') && line.includes('no answer within 1000 ms')), 'the failure is logged, as a reason');
    assert.equal((await whoami(bob)).body.error?.code, 'url_elicitation_required');
    assert.deepEqual((await record('GET', '/v1/mcp/servers/gh/grants', { key: ADMIN_KEY })).body.grants, []);

    // The stateless revision (2026-07-28) asks for the same URL as an input-required result (URL elicitation), which
    // a v2 SDK client hands to its elicitation handler; answered without authorizing, the retry is a failed call.
    const modern = new ClientV2(
      { name: 'per-user-v2', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { url: {} } } },
    );
    const asked: string[] = [];
    modern.setRequestHandler('elicitation/create', async (request) => {
      asked.push(String((request.params as { url?: string }).url));
      return { action: 'accept' };
    });
    await modern.connect(new HttpTransportV2(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${alice}` } } }));
    try {
      const result = await modern.callTool({ name: 'gh__whoami', arguments: {} });
      assert.equal(asked.length, 1, JSON.stringify(result));
      assert.ok(asked[0]!.startsWith(`${base}/oauth/connect/`), asked[0]!);
      assert.equal(result.isError, true);
      assert.match(JSON.stringify(result.content), /not authorized yet/);
    } finally {
      await modern.close();
    }
    assert.equal(userOf(await whoami(ADMIN_KEY)), 'admin', 'the shared grant is not a user\'s');
  });

  test('grants are sealed in Redis under hashed keys; no token or user id in clear, in Redis, logs or responses', async () => {
    const keys = await redis.keys(`${prefix}:oauth:server:gh:user:*`);
    assert.ok(keys.length >= 2, keys.join());
    assert.ok(keys.every((key) => !/alice|bob/.test(key)), 'no user id in a key name');
    const stored = (await Promise.all(keys.map((key) => redis.get(key)))).join('\n');
    // Each value is one sealed blob and nothing else (searching base64 text for "bob" matched by chance in a few runs in a hundred).
    for (const value of stored.split('\n')) assert.match(value, /^v1\.[A-Za-z0-9_-]+$/, 'sealed whole: nothing in clear');
    const tokens = [...upstream.issuedTokens(), alice, bob];
    const places = { Redis: stored, logs: logs.join('\n'), responses: responses.join('\n') };
    for (const [place, text] of Object.entries(places)) for (const token of tokens) assert.ok(!text.includes(token), `a token (${token.slice(0, 6)}…) appears in ${place}`);
  });
});
