import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startOAuthFixture, type OAuthFixture } from '../fixtures/mcp/oauth-server.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { waitFor } from '../helpers/mcp.js';
import { freePort } from '../helpers/redis-server.js';
import { RedisClusterFixture } from '../helpers/redis-topologies.js';
import { closeListening } from '../helpers/router.js';

/**
 * Per-user grants on a Redis Cluster (3 masters, started here): the admin lists and revokes them through the routes.
 * Listing used to SCAN, which ioredis sends to one random node of a cluster (SCAN names no key), so it found the
 * grants only when that node happened to hold toolrouter's slot; each listing here is repeated to make a miss certain.
 */
describe('per-user grants on a Redis Cluster', () => {
  const cluster = new RedisClusterFixture();
  let upstream: OAuthFixture;
  let router: Toolrouter;
  let server: Server;
  let base: string;

  const admin = (method: string, route: string) => call(base, method, route, { key: ADMIN_KEY });
  const whoami = (key: string) => call(base, 'POST', '/mcp-rest/tools/call', { key, body: { name: 'gh__whoami', arguments: {} } });
  const approve = (link: string, user: string, key: string) => upstream.approve(link, user, { key });
  const subjects = async () => {
    const seen = new Set<string>();
    for (let attempt = 0; attempt < 6; attempt++) {
      const listed = await admin('GET', '/v1/mcp/servers/gh/grants');
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      seen.add(JSON.stringify((listed.body.grants as { subject: string }[]).map((grant) => grant.subject)));
    }
    assert.equal(seen.size, 1, `every listing gives the same grants: ${[...seen].join(' | ')}`);
    return JSON.parse([...seen][0]!) as string[];
  };

  before(async () => {
    await cluster.start();
    upstream = await startOAuthFixture();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const config = loadConfig(
      { TOOLROUTER_SECRET_KEY: 'test-secret-key-for-oauth-0123456789' },
      {
        port,
        host: '127.0.0.1',
        adminKey: ADMIN_KEY,
        redis: { cluster: { nodes: cluster.urls.slice(0, 1) } },
        queue: { prefix: 'trgrants' },
        mcp: { search: false, pingIntervalMs: 0, startupWaitMs: 0, reconnect: { initialMs: 50, maxMs: 400 }, servers: { gh: { url: upstream.url, auth: { type: 'oauth', perUser: true } } } },
      },
    );
    router = await createToolrouter(config, { log: createLogger('silent') });
    server = await listen(router);
  });

  after(async () => {
    await closeListening(router, server);
    await upstream?.close();
    await cluster.stop();
  });

  test('two keys\' grants are listed on every request, and one revoked leaves the other', async () => {
    const granted = await admin('POST', '/v1/mcp/servers/gh/authorize');
    await approve(granted.body.authorization_url, 'admin', ADMIN_KEY);
    await waitFor('gh connected', async () => (await admin('GET', '/v1/mcp/servers')).body.servers[0].state === 'connected', 15_000);
    const first = await generateKey(base, {});
    const second = await generateKey(base, {});
    for (const [made, user] of [[first, 'alice'], [second, 'bob']] as const) {
      const asked = await whoami(made.key);
      assert.equal(asked.body.error?.code, 'url_elicitation_required', JSON.stringify(asked.body));
      await approve(asked.body.error.authorization_url, user, made.key);
      assert.equal(JSON.parse((await whoami(made.key)).body.content[0].text).user, user);
    }
    const both = [`key:${first.key_id}`, `key:${second.key_id}`].sort();
    assert.deepEqual(await subjects(), both);

    const revoked = await admin('DELETE', `/v1/mcp/servers/gh/grants/${encodeURIComponent(`key:${second.key_id}`)}`);
    assert.deepEqual(revoked.body, { revoked: true, upstream_revocation: 'revoked' });
    assert.deepEqual(await subjects(), [`key:${first.key_id}`]);
    assert.equal((await whoami(second.key)).body.error?.code, 'url_elicitation_required', 'the revoked key must authorize again');
    assert.equal(JSON.parse((await whoami(first.key)).body.content[0].text).user, 'alice', 'the other grant still works');
  });
});
