import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, afterEach, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { passConnectPage, startOAuthFixture, type OAuthFixture } from '../fixtures/mcp/oauth-server.js';
import { ADMIN_KEY, call, generateKey, mcpClientWithKey, type Reply } from '../helpers/keys.js';
import { waitFor } from '../helpers/mcp.js';
import { REDIS_URL } from '../helpers/processes.js';
import { freePort, PrivateRedis } from '../helpers/redis-server.js';
import { closeListening } from '../helpers/router.js';

/**
 * OAuth 2.1 to an upstream MCP server (src/mcp/upstream/oauth/), end to end with real parts: the fixture is an OAuth-protected
 * MCP server made of the SDK's own authorization server and bearer middleware; toolrouter's side is the SDK client's
 * auth(). The browser step is a plain HTTP client following the authorization server's redirect (it approves at once).
 */

const SECRET = 'test-secret-key-for-oauth-0123456789';
const FAST = { reconnect: { initialMs: 50, maxMs: 400 }, pingIntervalMs: 0, startupWaitMs: 0, connectTimeoutMs: 10_000 };

interface Instance {
  url: string;
  router: Toolrouter;
  server: Server;
}

/** Every log line (debug and up), every response body and every SDK console warning, to look for tokens in. */
class Evidence {
  readonly logs: string[] = [];
  readonly responses: string[] = [];
  readonly warnings: string[] = [];

  sink(): Writable {
    return new Writable({
      write: (chunk, _encoding, done) => {
        this.logs.push(String(chunk));
        done();
      },
    });
  }

  async call(baseUrl: string, method: string, route: string, options: { key?: string; body?: unknown } = {}): Promise<Reply> {
    const reply = await call(baseUrl, method, route, options);
    this.responses.push(typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body));
    return reply;
  }

  /** Fails naming where a token showed up. */
  assertNoTokens(tokens: string[], more: Record<string, string> = {}): void {
    assert.ok(tokens.length > 0, 'the fixture issued tokens');
    const places: Record<string, string> = { logs: this.logs.join('\n'), responses: this.responses.join('\n'), 'SDK warnings': this.warnings.join('\n'), ...more };
    for (const [place, text] of Object.entries(places)) {
      for (const token of tokens) assert.ok(!text.includes(token), `a token (${token.slice(0, 6)}…) appears in ${place}`);
    }
  }
}

async function startInstance(overrides: Record<string, unknown>, evidence: Evidence): Promise<Instance> {
  const config = loadConfig({ TOOLROUTER_SECRET_KEY: SECRET }, { port: 0, host: '127.0.0.1', adminKey: ADMIN_KEY, ...overrides });
  const router = await createToolrouter(config, { log: createLogger('debug', evidence.sink()) });
  const server = await listen(router);
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, router, server };
}

async function stopInstance(instance: Instance | undefined): Promise<void> {
  await closeListening(instance?.router, instance?.server);
}

async function serverStatus(evidence: Evidence, instance: Instance, name: string): Promise<any> {
  const reply = await evidence.call(instance.url, 'GET', '/v1/mcp/servers', { key: ADMIN_KEY });
  assert.equal(reply.status, 200);
  return (reply.body.servers as any[]).find((server) => server.name === name);
}

async function untilState(evidence: Evidence, instance: Instance, name: string, state: string, timeoutMs = 15_000): Promise<any> {
  return waitFor(`${name} ${state}`, async () => {
    const status = await serverStatus(evidence, instance, name);
    return status?.state === state ? status : undefined;
  }, timeoutMs);
}

/**
 * The admin's Connect: authorize, then the browser: open toolrouter's connect link and pass its page with the admin
 * key, open the authorization URL it sends the browser on to (the fixture approves at once and redirects), follow the
 * redirect to toolrouter's /oauth/callback with the cookie the connect page set. Returns the authorization URL and the
 * callback page.
 */
async function connect(evidence: Evidence, instance: Instance, name: string): Promise<{ authorizationUrl: URL; callback: Response; page: string }> {
  const reply = await evidence.call(instance.url, 'POST', `/v1/mcp/servers/${name}/authorize`, { key: ADMIN_KEY });
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  const link = reply.body.authorization_url as string;
  assert.ok(link.startsWith(`${instance.url}/oauth/connect/`), `toolrouter's connect link, not the upstream's URL: ${link}`);
  const passed = await passConnectPage(link, ADMIN_KEY);
  assert.ok(passed.cookie, 'the connect page sets the flow\'s cookie');
  const authorizationUrl = new URL(passed.authorizationUrl);
  const approval = await fetch(authorizationUrl, { redirect: 'manual' });
  assert.equal(approval.status, 302, 'the authorization server approves and redirects');
  const location = approval.headers.get('location')!;
  assert.ok(location.startsWith(`${instance.url}/oauth/callback?`), location);
  // The browser carries no toolrouter key: only the cookie the connect page set for this flow.
  const callback = await fetch(location, { headers: { cookie: passed.cookie! } });
  const page = await callback.text();
  evidence.responses.push(page);
  return { authorizationUrl, callback, page };
}

async function callTool(evidence: Evidence, instance: Instance, name: string, args: Record<string, unknown> = {}): Promise<Reply> {
  return evidence.call(instance.url, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, body: { name, arguments: args } });
}

describe('OAuth upstream, tokens in memory', () => {
  const evidence = new Evidence();
  let fixture: OAuthFixture;
  let api: Instance;
  const originalWarn = console.warn;

  before(async () => {
    // The SDK reports a refused refresh with console.warn; collected to check it names no token.
    console.warn = (...args: unknown[]) => void evidence.warnings.push(args.map(String).join(' '));
    fixture = await startOAuthFixture();
    api = await startInstance({ mcp: { ...FAST, servers: { gh: { url: fixture.url, auth: 'oauth' } } } }, evidence);
  });

  after(async () => {
    console.warn = originalWarn;
    await stopInstance(api);
    await fixture?.close();
  });

  test('never connected: needs_authorization, and its tools answer "needs authorization", not "unknown tool"', async () => {
    const status = await untilState(evidence, api, 'gh', 'needs_authorization');
    assert.equal(status.authorization.reason, 'never_connected');
    assert.equal(status.auth, 'oauth');
    assert.equal(status.tools, 0);
    const reply = await callTool(evidence, api, 'gh__list_repos');
    assert.equal(reply.status, 503, JSON.stringify(reply.body));
    assert.match(reply.body.error.message, /unavailable: needs authorization \(never_connected/);
    assert.equal(fixture.counts().registrations, 0, 'nothing registers before the admin asks');
    // MCP answers say the server's tools are missing.
    const client = await mcpClientWithKey(api.url, ADMIN_KEY);
    try {
      const listed = await client.listTools();
      assert.deepEqual((listed._meta?.['toolrouter/upstreams'] as { down: string[] } | undefined)?.down, ['gh']);
    } finally {
      await client.close();
    }
  });

  test('authorize needs the admin key, and names only OAuth servers', async () => {
    const key = (await generateKey(api.url, {})).key;
    assert.equal((await evidence.call(api.url, 'POST', '/v1/mcp/servers/gh/authorize', { key })).status, 403);
    assert.equal((await evidence.call(api.url, 'POST', '/v1/mcp/servers/gh/authorize')).status, 401);
    const unknown = await evidence.call(api.url, 'POST', '/v1/mcp/servers/nope/authorize', { key: ADMIN_KEY });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'not_found');
    const forged = await fetch(`${api.url}/oauth/callback?code=x&state=forged`);
    assert.equal(forged.status, 400);
    assert.match(await forged.text(), /unknown or expired authorization/);
  });

  test('authorize → browser → callback connects the server: tools listed and called', async () => {
    const { authorizationUrl, callback, page } = await connect(evidence, api, 'gh');
    // Authorization code with PKCE (S256), the resource indicator, and a client registered dynamically.
    assert.equal(authorizationUrl.origin + '/', fixture.issuer);
    assert.equal(authorizationUrl.searchParams.get('code_challenge_method'), 'S256');
    assert.ok(authorizationUrl.searchParams.get('code_challenge'));
    assert.equal(authorizationUrl.searchParams.get('resource'), fixture.url);
    assert.equal(authorizationUrl.searchParams.get('redirect_uri'), `${api.url}/oauth/callback`);
    assert.equal(fixture.counts().registrations, 1);
    assert.equal(callback.status, 200, page);
    assert.match(page, /authorized for the MCP server &#34;gh&#34;/);
    assert.equal(fixture.lastResource(), fixture.url, 'the token request named the MCP server as resource');

    const status = await untilState(evidence, api, 'gh', 'connected');
    assert.equal(status.authorization, undefined);
    const listed = await evidence.call(api.url, 'GET', '/mcp-rest/tools/list', { key: ADMIN_KEY });
    assert.deepEqual((listed.body.tools as any[]).map((tool) => tool.name).filter((name: string) => name.startsWith('gh__')).sort(), ['gh__list_repos', 'gh__whoami']);
    const result = await callTool(evidence, api, 'gh__list_repos', { owner: 'octo' });
    assert.equal(result.status, 200, JSON.stringify(result.body));
    assert.equal(result.body.content[0].text, 'repositories of octo: toolrouter, fixtures');
  });

  test('an expired access token is refreshed (the refresh token rotates) and the call goes through', async () => {
    const before = fixture.counts();
    fixture.expireAccessTokens();
    const result = await callTool(evidence, api, 'gh__whoami');
    assert.equal(result.status, 200, JSON.stringify(result.body));
    const after = fixture.counts();
    assert.equal(after.refreshes - before.refreshes, 1);
    assert.equal(after.refreshReuse, 0);
    assert.equal(after.authorizations, before.authorizations, 'no new browser step');
    assert.equal((await serverStatus(evidence, api, 'gh')).state, 'connected');
  });

  test('a refresh that fails for a passing reason: needs_authorization (refresh_failed), healed by the retries alone', async () => {
    fixture.failRefreshes(true);
    fixture.expireAccessTokens();
    await callTool(evidence, api, 'gh__whoami');
    const status = await untilState(evidence, api, 'gh', 'needs_authorization');
    assert.equal(status.authorization.reason, 'refresh_failed');
    const authorizations = fixture.counts().authorizations;
    fixture.failRefreshes(false);
    await untilState(evidence, api, 'gh', 'connected');
    assert.equal((await callTool(evidence, api, 'gh__whoami')).status, 200);
    assert.equal(fixture.counts().authorizations, authorizations, 'no browser step was needed');
  });

  test('a revoked grant turns the server to needs_authorization (revoked); authorizing again restores it', async () => {
    fixture.revokeGrants();
    fixture.expireAccessTokens();
    // This call meets the 401; the refresh is refused and the connection gives way.
    await callTool(evidence, api, 'gh__whoami');
    const status = await untilState(evidence, api, 'gh', 'needs_authorization');
    assert.equal(status.authorization.reason, 'revoked');
    const refused = await callTool(evidence, api, 'gh__whoami');
    assert.equal(refused.status, 503);
    assert.match(refused.body.error.message, /needs authorization \(revoked/);
    assert.notEqual(refused.body.error.code, 'not_found');

    await connect(evidence, api, 'gh');
    await untilState(evidence, api, 'gh', 'connected');
    assert.equal((await callTool(evidence, api, 'gh__whoami')).status, 200);
    assert.equal(fixture.counts().registrations, 1, 'the registered client is reused');
  });

  test('tokens appear in no log line, response or SDK warning', () => {
    evidence.assertNoTokens(fixture.issuedTokens());
  });
});

describe('OAuth upstream speaking 2026-07-28', () => {
  const evidence = new Evidence();
  let fixture: OAuthFixture;
  let api: Instance;

  before(async () => {
    fixture = await startOAuthFixture({ revision: '2026-07-28' });
    api = await startInstance({ mcp: { ...FAST, servers: { linear: { url: fixture.url, auth: 'oauth' } } } }, evidence);
  });

  after(async () => {
    await stopInstance(api);
    await fixture?.close();
  });

  test('the same authorize and refresh over the stateless revision', async () => {
    await untilState(evidence, api, 'linear', 'needs_authorization');
    await connect(evidence, api, 'linear');
    const status = await untilState(evidence, api, 'linear', 'connected');
    assert.equal(status.revision, '2026-07-28');
    const whoami = await callTool(evidence, api, 'linear__whoami');
    assert.equal(whoami.status, 200, JSON.stringify(whoami.body));
    assert.deepEqual(JSON.parse(whoami.body.content[0].text), { era: 'modern' });
    fixture.expireAccessTokens();
    assert.equal((await callTool(evidence, api, 'linear__list_repos', { owner: 'octo' })).status, 200);
    assert.equal(fixture.counts().refreshes, 1);
    evidence.assertNoTokens(fixture.issuedTokens());
  });
});

describe('OAuth upstream, client ID metadata document instead of registration', () => {
  const evidence = new Evidence();
  const metadataUrl = 'https://toolrouter.example.test/oauth/client-metadata.json';
  let fixture: OAuthFixture;
  let api: Instance;

  before(async () => {
    // toolrouter's port is picked first: the document and the callback name it. The authorization server reaches the
    // document over loopback HTTP instead of the https name (no DNS or TLS in tests).
    const port = await freePort();
    const local = `http://127.0.0.1:${port}`;
    fixture = await startOAuthFixture({ clientMetadataDocuments: (clientId) => clientId.replace('https://toolrouter.example.test', local) });
    const oauth = { callbackUrl: `${local}/oauth/callback`, clientMetadataUrl: metadataUrl };
    api = await startInstance({ port, mcp: { ...FAST, oauth, servers: { docs: { url: fixture.url, auth: 'oauth' } } } }, evidence);
  });

  after(async () => {
    await stopInstance(api);
    await fixture?.close();
  });

  test('the metadata URL is the client ID; the authorization server reads the document, nothing registers', async () => {
    const document = await fetch(`${api.url}/oauth/client-metadata.json`);
    assert.equal(document.status, 200, 'public: no key needed');
    assert.deepEqual(((await document.json()) as { redirect_uris: string[] }).redirect_uris, [`${api.url}/oauth/callback`]);
    await untilState(evidence, api, 'docs', 'needs_authorization');
    const { authorizationUrl } = await connect(evidence, api, 'docs');
    assert.equal(authorizationUrl.searchParams.get('client_id'), metadataUrl);
    await untilState(evidence, api, 'docs', 'connected');
    assert.equal((await callTool(evidence, api, 'docs__whoami')).status, 200);
    const counts = fixture.counts();
    assert.equal(counts.registrations, 0);
    assert.ok(counts.metadataDocumentsFetched >= 1);
  });
});

describe('OAuth upstream, client_credentials', () => {
  const evidence = new Evidence();
  let fixture: OAuthFixture;
  let api: Instance;

  before(async () => {
    fixture = await startOAuthFixture();
    const auth = { type: 'oauth', grant: 'client_credentials', clientId: fixture.serviceClient.clientId, clientSecret: fixture.serviceClient.clientSecret };
    api = await startInstance({ mcp: { ...FAST, servers: { svc: { url: fixture.url, auth } } } }, evidence);
  });

  after(async () => {
    await stopInstance(api);
    await fixture?.close();
  });

  test('connects without a browser, and gets a new token when the old one expires', async () => {
    await untilState(evidence, api, 'svc', 'connected');
    const whoami = await callTool(evidence, api, 'svc__whoami');
    assert.equal(JSON.parse(whoami.body.content[0].text).client, fixture.serviceClient.clientId);
    assert.equal(fixture.counts().clientCredentials, 1);
    fixture.expireAccessTokens();
    assert.equal((await callTool(evidence, api, 'svc__whoami')).status, 200);
    assert.equal(fixture.counts().clientCredentials, 2);
    const authorize = await evidence.call(api.url, 'POST', '/v1/mcp/servers/svc/authorize', { key: ADMIN_KEY });
    assert.equal(authorize.status, 409);
    assert.equal(authorize.body.error.code, 'conflict');
    assert.match(authorize.body.error.message, /client_credentials/);
    evidence.assertNoTokens(fixture.issuedTokens(), { secret: '' });
    assert.ok(!evidence.logs.join('\n').includes(fixture.serviceClient.clientSecret), 'the client secret is not logged');
  });
});

describe('OAuth upstream, without TOOLROUTER_SECRET_KEY where tokens would be stored', () => {
  test('the OAuth server is not started, and says why; the state file needs the key too', async () => {
    const evidence = new Evidence();
    const fixture = await startOAuthFixture();
    const stateDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-oauth-'));
    const config = loadConfig({}, { port: 0, host: '127.0.0.1', adminKey: ADMIN_KEY, stateDir, mcp: { ...FAST, servers: { gh: { url: fixture.url, auth: 'oauth' } } } });
    const router = await createToolrouter(config, { log: createLogger('debug', evidence.sink()) });
    const server = await listen(router);
    const address = server.address();
    const api = { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, router, server };
    try {
      const status = await waitFor('gh down', async () => {
        const current = await serverStatus(evidence, api, 'gh');
        return current?.lastError ? current : undefined;
      });
      assert.equal(status.state, 'down');
      assert.match(status.lastError, /TOOLROUTER_SECRET_KEY, which is not set/);
      assert.ok(evidence.logs.some((line) => line.includes('TOOLROUTER_SECRET_KEY')), 'the log says why at start');
      const authorize = await evidence.call(api.url, 'POST', '/v1/mcp/servers/gh/authorize', { key: ADMIN_KEY });
      assert.equal(authorize.status, 409);
      assert.match(authorize.body.error.message, /TOOLROUTER_SECRET_KEY/);
      assert.equal(fixture.counts().mcpRequests, 0, 'no request reached the server');
    } finally {
      await stopInstance(api);
      await fixture.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});

describe('OAuth upstream, state file across a restart', () => {
  let fixture: OAuthFixture;
  let stateDir: string;
  let api: Instance | undefined;

  before(async () => {
    fixture = await startOAuthFixture();
    stateDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-oauth-'));
  });

  afterEach(async () => {
    await stopInstance(api);
    api = undefined;
  });

  after(async () => {
    await fixture?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  test('a grant kept in stateDir (sealed) connects the server again after a restart, without a browser', async () => {
    const evidence = new Evidence();
    const settings = { stateDir, mcp: { ...FAST, servers: { gh: { url: fixture.url, auth: 'oauth' } } } };
    api = await startInstance(settings, evidence);
    await untilState(evidence, api, 'gh', 'needs_authorization');
    await connect(evidence, api, 'gh');
    await untilState(evidence, api, 'gh', 'connected');
    await stopInstance(api);

    const file = readFileSync(path.join(stateDir, 'oauth.json'), 'utf8');
    assert.match(file, /"gh": "v1\./);
    evidence.assertNoTokens(fixture.issuedTokens(), { 'the state file': file });

    const authorizationsBefore = fixture.counts().authorizations;
    api = await startInstance(settings, evidence);
    await untilState(evidence, api, 'gh', 'connected');
    assert.equal((await callTool(evidence, api, 'gh__whoami')).status, 200);
    assert.equal(fixture.counts().authorizations, authorizationsBefore);
  });
});

describe('OAuth upstream, two instances sharing one grant through Redis', () => {
  const evidence = new Evidence();
  const prefix = `oauth-${process.pid}-${Date.now()}`;
  const redis = new Redis(REDIS_URL);
  let fixture: OAuthFixture;
  let first: Instance;
  let second: Instance;

  before(async () => {
    fixture = await startOAuthFixture();
    const settings = { redisUrl: REDIS_URL, queue: { prefix }, mcp: { ...FAST, reconnect: { initialMs: 5_000, maxMs: 30_000 }, servers: { gh: { url: fixture.url, auth: 'oauth' } } } };
    first = await startInstance(settings, evidence);
    second = await startInstance(settings, evidence);
  });

  after(async () => {
    await stopInstance(first);
    await stopInstance(second);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await fixture?.close();
  });

  test('authorized through one instance, the other connects at once (announced, not at its next retry)', async () => {
    await untilState(evidence, first, 'gh', 'needs_authorization');
    await untilState(evidence, second, 'gh', 'needs_authorization');
    await connect(evidence, first, 'gh');
    // The second instance's next retry is seconds away (initialMs 5 s): connecting sooner means it heard of the grant.
    await untilState(evidence, first, 'gh', 'connected', 4_000);
    await untilState(evidence, second, 'gh', 'connected', 4_000);
    assert.equal((await callTool(evidence, second, 'gh__whoami')).status, 200);
  });

  test('one refresh for both when the access token expires: the rotating refresh token is never spent twice', async () => {
    const before = fixture.counts();
    fixture.expireAccessTokens();
    // The first refresh is held unanswered until both instances have been refused: they race for certain.
    const release = fixture.holdRefreshes();
    const calls = Promise.all([callTool(evidence, first, 'gh__whoami'), callTool(evidence, second, 'gh__list_repos')]);
    await waitFor('both instances refused and one refresh under way', () => {
      const now = fixture.counts();
      return now.rejected - before.rejected >= 2 && now.refreshRequests - before.refreshRequests >= 1;
    });
    release();
    const [a, b] = await calls;
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(b.status, 200, JSON.stringify(b.body));
    const after = fixture.counts();
    assert.equal(after.refreshRequests - before.refreshRequests, 1, 'one instance refreshed, the other used its tokens');
    assert.equal(after.refreshes - before.refreshes, 1);
    assert.equal(after.refreshReuse, 0, 'no refresh token was presented twice');
    assert.equal((await serverStatus(evidence, first, 'gh')).state, 'connected');
    assert.equal((await serverStatus(evidence, second, 'gh')).state, 'connected');
  });

  test('Redis holds the grant sealed: no token, verifier or client id in clear text', async () => {
    const keys = await redis.keys(`${prefix}:oauth:*`);
    assert.ok(keys.includes(`${prefix}:oauth:server:gh`), keys.join());
    const values = await Promise.all(keys.filter((key) => !key.includes(':lock:')).map((key) => redis.get(key)));
    const stored = values.join('\n');
    assert.match(stored, /^v1\./m);
    assert.ok(!stored.includes('client_id') && !stored.includes('refresh_token'), 'records are not readable JSON');
    evidence.assertNoTokens(fixture.issuedTokens(), { Redis: stored });
  });
});

describe('OAuth upstream, Redis restarting empty', () => {
  const evidence = new Evidence();
  const redis = new PrivateRedis();
  let fixture: OAuthFixture;
  let api: Instance;

  before(async () => {
    await redis.start();
    fixture = await startOAuthFixture();
    const settings = { redisUrl: redis.url, queue: { prefix: 'oauth-restore', generationCheckMs: 300 }, mcp: { ...FAST, servers: { gh: { url: fixture.url, auth: 'oauth' } } } };
    api = await startInstance(settings, evidence);
  });

  after(async () => {
    await stopInstance(api);
    await fixture?.close();
    await redis.stop();
  });

  test('the instance puts the grant it holds back, so the server survives the next token expiry', async () => {
    await untilState(evidence, api, 'gh', 'needs_authorization');
    await connect(evidence, api, 'gh');
    await untilState(evidence, api, 'gh', 'connected');
    const client = new Redis(redis.url);
    try {
      await redis.stop();
      await redis.start();
      // Back empty: the generation check notices and the holders store again what they hold.
      await waitFor('the grant back in Redis', async () => (await client.get('oauth-restore:oauth:server:gh').catch(() => null)) !== null, 20_000);
      fixture.expireAccessTokens();
      const reply = await callTool(evidence, api, 'gh__whoami');
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      assert.equal((await serverStatus(evidence, api, 'gh')).state, 'connected');
    } finally {
      client.disconnect();
    }
  });
});

describe('OAuth upstream, fixes from the outside run', () => {
  const evidence = new Evidence();
  let fixture: OAuthFixture;
  let api: Instance;

  before(async () => {
    // The authorization server on its own port: only the protected resource metadata says where it is.
    fixture = await startOAuthFixture({ separateIssuer: true });
    api = await startInstance({ mcp: { ...FAST, servers: { gh: { url: fixture.url, auth: 'oauth' } } } }, evidence);
  });

  after(async () => {
    await stopInstance(api);
    await fixture?.close();
  });

  test('a key other than the admin is told a server is unavailable, without the upstream\'s words', async () => {
    await untilState(evidence, api, 'gh', 'needs_authorization');
    const { key } = await generateKey(api.url, {});
    const reply = await evidence.call(api.url, 'POST', '/mcp-rest/tools/call', { key, body: { name: 'gh__whoami', arguments: {} } });
    assert.equal(reply.status, 503);
    assert.equal(reply.body.error.message, 'upstream MCP server "gh" is unavailable right now; retry later');
    // The admin still reads why.
    const admin = await callTool(evidence, api, 'gh__whoami');
    assert.match(admin.body.error.message, /needs authorization \(never_connected/);
  });

  test('a failed metadata fetch on the first authorize does not pin the wrong authorization server', async () => {
    fixture.failResourceMetadata(1_000);
    const failed = await evidence.call(api.url, 'POST', '/v1/mcp/servers/gh/authorize', { key: ADMIN_KEY });
    // Without the metadata the SDK guesses the MCP server's origin, which has no authorization server.
    assert.equal(failed.status, 502, JSON.stringify(failed.body));
    const fetchesBefore = fixture.resourceMetadataFetches();
    fixture.failResourceMetadata(0);
    const { authorizationUrl, callback, page } = await connect(evidence, api, 'gh');
    assert.ok(fixture.resourceMetadataFetches() > fetchesBefore, 'the metadata was asked for again');
    assert.equal(authorizationUrl.origin + '/', fixture.issuer, 'the authorization server the metadata names, not the guess');
    assert.notEqual(new URL(fixture.url).origin + '/', fixture.issuer);
    assert.equal(callback.status, 200, page);
    await untilState(evidence, api, 'gh', 'connected');
    const result = await callTool(evidence, api, 'gh__whoami');
    assert.equal(result.status, 200, JSON.stringify(result.body));
  });

  test('reconnect forgets the discovery: a server that moves its authorization server is followed', async () => {
    const before = fixture.resourceMetadataFetches();
    fixture.expireAccessTokens();
    assert.equal((await evidence.call(api.url, 'POST', '/v1/mcp/servers/gh/reconnect', { key: ADMIN_KEY })).status, 202);
    await untilState(evidence, api, 'gh', 'connected');
    assert.ok(fixture.resourceMetadataFetches() > before, 'the refresh after the reconnect discovered again');
    evidence.assertNoTokens(fixture.issuedTokens());
  });
});
