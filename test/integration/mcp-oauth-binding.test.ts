import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { passConnectPage, startOAuthFixture, type OAuthFixture } from '../fixtures/mcp/oauth-server.js';
import { ADMIN_KEY, call, generateKey, type Reply } from '../helpers/keys.js';
import { waitFor } from '../helpers/mcp.js';
import { REDIS_URL } from '../helpers/processes.js';
import { freePort } from '../helpers/redis-server.js';
import { closeListening } from '../helpers/router.js';

/**
 * A forwarded authorization link must not swap accounts (issue 50, item 3). Bob is sent a link to authorize his own
 * grant on a per-user OAuth upstream; alice, signed in at the upstream's authorization server in her own browser, must
 * not be able to complete it, or bob's calls would act as alice. Real parts: toolrouter with keys and a real Redis, the
 * SDK's OAuth-protected MCP server as the upstream (whoami reports whose grant a call used), browsers as plain fetch
 * calls each carrying only their own cookies.
 */

const SECRET = 'test-secret-key-for-oauth-0123456789';

describe('authorization links are bound to whoever started them', () => {
  const prefix = `oauth-binding-${process.pid}-${Date.now()}`;
  const redis = new Redis(REDIS_URL);
  let upstream: OAuthFixture;
  let router: Toolrouter;
  let server: Server;
  let base: string;
  let alice: { key: string; key_id: string };
  let bob: { key: string; key_id: string };

  const whoami = (key: string) => call(base, 'POST', '/mcp-rest/tools/call', { key, body: { name: 'gh__whoami', arguments: {} } });
  const userOf = (reply: Reply) => JSON.parse(reply.body.content[0].text).user as string;
  /** Bob (or anyone) without a grant: the link the error hands out. */
  const linkFor = async (key: string): Promise<string> => {
    const asked = await whoami(key);
    assert.equal(asked.body.error?.code, 'url_elicitation_required', JSON.stringify(asked.body));
    return asked.body.error.authorization_url as string;
  };
  const grants = async () => ((await call(base, 'GET', '/v1/mcp/servers/gh/grants', { key: ADMIN_KEY })).body.grants as { subject: string }[]).map((grant) => grant.subject);
  const postKey = (link: string, key: string, headers: Record<string, string> = {}) =>
    fetch(link, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams({ key }).toString() });

  before(async () => {
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
        mcp: {
          search: false,
          pingIntervalMs: 0,
          startupWaitMs: 0,
          reconnect: { initialMs: 50, maxMs: 400 },
          connectTimeoutMs: 10_000,
          servers: { gh: { url: upstream.url, auth: { type: 'oauth', perUser: true } } },
        },
      },
    );
    router = await createToolrouter(config, { log: createLogger('silent') });
    server = await listen(router);
    // The shared grant (the admin's) lists the server's tools.
    const admin = await call(base, 'POST', '/v1/mcp/servers/gh/authorize', { key: ADMIN_KEY });
    assert.equal(admin.status, 200, JSON.stringify(admin.body));
    await upstream.approve(admin.body.authorization_url, 'admin', { key: ADMIN_KEY });
    await waitFor('gh connected', async () => (await call(base, 'GET', '/v1/mcp/servers', { key: ADMIN_KEY })).body.servers[0].state === 'connected', 15_000);
    alice = await generateKey(base, {});
    bob = await generateKey(base, {});
  });

  after(async () => {
    await closeListening(router, server);
    await upstream?.close();
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  test('alice\'s browser approving the authorization bob started gives bob no grant from alice\'s account', async () => {
    const link = await linkFor(bob.key);
    // Bob's browser passes the connect page (his key); the authorization server's URL it is sent on to then reaches
    // alice (forwarded, copied from the address bar). Her browser, signed in upstream as alice, approves it and comes
    // back to toolrouter without bob's cookie.
    const bobsBrowser = await passConnectPage(link, bob.key);
    upstream.loginAs('alice');
    const approval = await fetch(bobsBrowser.authorizationUrl, { redirect: 'manual' });
    assert.equal(approval.status, 302, 'the authorization server approves as alice');
    const callback = await fetch(approval.headers.get('location')!);
    const page = await callback.text();
    assert.equal(callback.status, 403, page);
    assert.match(page, /did not open the authorization link/);

    const after = await whoami(bob.key);
    assert.equal(after.body.error?.code, 'url_elicitation_required', `bob must still authorize, not act as alice: ${JSON.stringify(after.body)}`);
    assert.ok(!(await grants()).includes(`key:${bob.key_id}`), 'no grant for bob');
  });

  test('the connect page refuses alice\'s key (and a form from another site) for bob\'s flow; bob\'s own browser then completes it', async () => {
    const link = await linkFor(bob.key);
    assert.ok(link.startsWith(`${base}/oauth/connect/`), link);
    const form = await fetch(link, { redirect: 'manual' });
    assert.equal(form.status, 200, 'the page asks for the key before anything goes upstream');
    assert.match(await form.text(), /<form method="post">/);

    const asAlice = await postKey(link, alice.key);
    assert.equal(asAlice.status, 403, await asAlice.text());
    assert.equal(asAlice.headers.get('location'), null, 'not sent on to the authorization server');
    assert.equal(asAlice.headers.get('set-cookie'), null, 'no binding cookie');
    const wrong = await postKey(link, 'trk_not-a-key');
    assert.equal(wrong.status, 401, await wrong.text());
    const crossSite = await postKey(link, bob.key, { origin: 'https://elsewhere.example' });
    assert.equal(crossSite.status, 403, await crossSite.text());

    // The honest walk: bob's browser, his key, his account upstream.
    const { page } = await upstream.approve(link, 'bob', { key: bob.key });
    assert.match(page, /now act as your account/);
    assert.ok(page.includes(`&#34;key:${bob.key_id}&#34;`), `the page names the subject linked: ${page}`);
    assert.ok(page.includes(`&#34;gh&#34; (${new URL(upstream.url).host}), account &#34;bob&#34; there`), `the page names the upstream and the account approved there: ${page}`);
    assert.equal(userOf(await whoami(bob.key)), 'bob');
    assert.equal((await whoami(alice.key)).body.error?.code, 'url_elicitation_required', 'alice has no grant from any of this');

    // Single use: the link is spent.
    const again = await fetch(link, { redirect: 'manual' });
    assert.equal(again.status, 404, await again.text());
  });

  test('an edited flow id, or a link of the admin\'s shared grant opened with a user\'s key, goes nowhere', async () => {
    const link = await linkFor(alice.key);
    const flowId = link.slice(link.lastIndexOf('/') + 1);
    const edited = `${link.slice(0, link.lastIndexOf('/') + 1)}${flowId.slice(0, -1)}${flowId.endsWith('A') ? 'B' : 'A'}`;
    const opened = await fetch(edited, { redirect: 'manual' });
    assert.equal(opened.status, 404, await opened.text());
    const posted = await postKey(edited, alice.key);
    assert.equal(posted.status, 404, await posted.text());
    assert.equal(posted.headers.get('location'), null);
    for (const junk of ['x', '..%2F..%2Fv1%2Fkeys', 'A'.repeat(5_000)]) {
      assert.equal((await fetch(`${base}/oauth/connect/${junk}`, { redirect: 'manual' })).status, 404, junk);
    }
    // The real link still works for alice (editing a copy did not spend it).
    await upstream.approve(link, 'alice', { key: alice.key });
    assert.equal(userOf(await whoami(alice.key)), 'alice');

    const shared = await call(base, 'POST', '/v1/mcp/servers/gh/authorize', { key: ADMIN_KEY });
    const asUser = await postKey(shared.body.authorization_url, alice.key);
    assert.equal(asUser.status, 403, 'only the admin completes the shared grant\'s authorization');
    assert.equal(userOf(await whoami(ADMIN_KEY)), 'admin');
  });

  test('a service\'s assert_user key completes the flow it started for one of its users; another key cannot', async () => {
    const service = await generateKey(base, { assert_user: true });
    const asCarol = (key: string) => call(base, 'POST', '/mcp-rest/tools/call', { key, headers: { 'x-toolrouter-user': 'carol' }, body: { name: 'gh__whoami', arguments: {} } });
    const asked = await asCarol(service.key);
    assert.equal(asked.body.error?.code, 'url_elicitation_required', JSON.stringify(asked.body));
    const link = asked.body.error.authorization_url as string;
    assert.equal((await postKey(link, bob.key)).status, 403, 'bob\'s key is not the service that started it');
    const { page } = await upstream.approve(link, 'carol', { key: service.key });
    assert.ok(page.includes('&#34;user:carol&#34;'), page);
    assert.equal(userOf(await asCarol(service.key)), 'carol');
  });
});
