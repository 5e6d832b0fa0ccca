import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startIdentityProvider, type IdentityProvider } from '../fixtures/identity-provider.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { stdioFixtureServer, waitFor } from '../helpers/mcp.js';
import { freePort } from '../helpers/redis-server.js';
import { closeListening } from '../helpers/router.js';

/**
 * toolrouter as an OAuth 2.1 resource server (auth.oauth), with real parts: a real authorization server (the MCP SDK's
 * auth router issuing RS256/ES256 JWTs, test/fixtures/identity-provider.ts), a real MCP SDK client running the SDK's
 * OAuth client flow against /mcp (401 → protected resource metadata → authorization server → PKCE → token → connect),
 * and tokens minted to be refused (expired, another audience, another key, unsigned).
 */

/** The OAuth client side of an MCP client, in memory; the "browser" is the test following the authorization URL. */
class MemoryClientProvider implements OAuthClientProvider {
  readonly redirectUrl = 'http://127.0.0.1:9/callback';
  authorizationUrl: URL | undefined;
  private client: OAuthClientInformationMixed | undefined;
  private saved: OAuthTokens | undefined;
  private verifier = '';

  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'identity-test', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(client: OAuthClientInformationMixed) {
    this.client = client;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

describe('toolrouter as an OAuth resource server', () => {
  const logs: string[] = [];
  const responses: string[] = [];
  let idp: IdentityProvider;
  let router: Toolrouter;
  let server: Server;
  let base: string;
  let resource: string;

  const record = async (method: string, path: string, options: { key?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
    const reply = await call(base, method, path, options);
    responses.push(typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body), [...reply.headers].join('\n'));
    return reply;
  };

  before(async () => {
    idp = await startIdentityProvider();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    resource = `${base}/mcp`;
    const config = loadConfig(
      {},
      {
        port,
        host: '127.0.0.1',
        adminKey: ADMIN_KEY,
        auth: {
          oauth: {
            issuer: idp.issuer,
            audience: resource,
            jwksCooldownMs: 0,
            claims: { claim: 'groups', keys: { interns: { allowed_servers: ['nothing-here'] } } },
          },
        },
        mcp: { search: false, startupWaitMs: 5_000, pingIntervalMs: 0, servers: { fx: stdioFixtureServer() } },
      },
    );
    const sink = new Writable({ write: (chunk, _encoding, done) => (logs.push(String(chunk)), done()) });
    router = await createToolrouter(config, { log: createLogger('debug', sink) });
    server = await listen(router);
    // The stdio fixture is a spawned process: on a busy machine it takes seconds to list its tools.
    await waitFor('fx connected', () => router.mcp.upstreams.status().every((status) => status.state === 'connected'), 60_000);
  });

  after(async () => {
    await closeListening(router, server);
    await idp?.close();
  });

  test('/mcp without credentials: 401 with a Bearer challenge naming the protected resource metadata', async () => {
    const reply = await record('POST', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} } });
    assert.equal(reply.status, 401);
    const challenge = reply.headers.get('www-authenticate') ?? '';
    assert.match(challenge, /^Bearer /);
    assert.ok(challenge.includes(`resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`), challenge);
    assert.doesNotMatch(challenge, /error=/, 'no token was presented, so no token error');
    // The REST faces say the same to a client that speaks OAuth.
    const rest = await record('GET', '/mcp-rest/tools/list');
    assert.equal(rest.status, 401);
    assert.match(rest.headers.get('www-authenticate') ?? '', /resource_metadata=/);
  });

  test('RFC 9728 metadata at the well-known path and its /mcp form, public, naming the issuer', async () => {
    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const reply = await record('GET', path);
      assert.equal(reply.status, 200, path);
      assert.equal(reply.body.resource, resource);
      assert.deepEqual(reply.body.authorization_servers, [idp.issuer]);
      assert.deepEqual(reply.body.bearer_methods_supported, ['header']);
    }
  });

  test('an MCP SDK client with only OAuth connects through the IdP and sees the tools', async () => {
    idp.loginAs({ sub: 'alice' });
    const provider = new MemoryClientProvider();
    const first = new Client({ name: 'oauth-only', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider });
    await assert.rejects(first.connect(transport), UnauthorizedError);
    assert.ok(provider.authorizationUrl, 'the SDK found the authorization server through toolrouter and sent the browser there');
    assert.equal(provider.authorizationUrl.origin + '/', idp.issuer);
    assert.equal(provider.authorizationUrl.searchParams.get('resource'), resource, 'the token is asked for toolrouter (RFC 8707)');
    assert.equal(provider.authorizationUrl.searchParams.get('code_challenge_method'), 'S256');
    // The browser: the IdP approves as alice and redirects back to the client with a code.
    const approval = await fetch(provider.authorizationUrl, { redirect: 'manual' });
    assert.equal(approval.status, 302);
    const code = new URL(approval.headers.get('location')!).searchParams.get('code')!;
    await transport.finishAuth(code);
    assert.ok(provider.tokens()?.access_token.split('.').length === 3, 'the IdP issued a JWT');

    const client = new Client({ name: 'oauth-only', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }));
    try {
      const { tools } = await client.listTools();
      assert.ok(tools.some((tool) => tool.name === 'fx__echo'), JSON.stringify(tools.map((tool) => tool.name)));
      const result = await client.callTool({ name: 'fx__echo', arguments: { text: 'hello from alice' } });
      assert.match(JSON.stringify(result.content), /hello from alice/);
    } finally {
      await client.close();
    }
    // The same token works on REST, and API keys keep working beside it.
    const token = provider.tokens()!.access_token;
    assert.equal((await record('GET', '/mcp-rest/tools/list', { key: token })).status, 200);
    const { key } = await generateKey(base, {});
    assert.equal((await record('GET', '/mcp-rest/tools/list', { key })).status, 200);
    // A user is not the admin.
    assert.equal((await record('GET', '/key/list', { key: token })).status, 403);
  });

  test('resource unset, audience on 127.0.0.1: a client on localhost signs in and is served (not "wrong audience"); a scope is advertised', async () => {
    const local = resource.replace('127.0.0.1', 'localhost');
    const metadata = await call(new URL(local).origin, 'GET', '/.well-known/oauth-protected-resource/mcp');
    assert.equal(metadata.body.resource, local);
    // No requiredScopes: still a scope to ask for, since providers refuse a request with none (oidc-provider: access_denied).
    assert.deepEqual(metadata.body.scopes_supported, ['openid']);
    idp.loginAs({ sub: 'erin' });
    const provider = new MemoryClientProvider();
    const transport = new StreamableHTTPClientTransport(new URL(local), { authProvider: provider });
    await assert.rejects(new Client({ name: 'on-localhost', version: '1.0.0' }).connect(transport), UnauthorizedError);
    assert.equal(provider.authorizationUrl?.searchParams.get('resource'), local);
    assert.equal(provider.authorizationUrl?.searchParams.get('scope'), 'openid');
    const approval = await fetch(provider.authorizationUrl!, { redirect: 'manual' });
    await transport.finishAuth(new URL(approval.headers.get('location')!).searchParams.get('code')!);
    const client = new Client({ name: 'on-localhost', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(local), { authProvider: provider }));
    try {
      const result = await client.callTool({ name: 'fx__echo', arguments: { text: 'hello from localhost' } });
      assert.match(JSON.stringify(result.content), /hello from localhost/);
    } finally {
      await client.close();
    }
    // The other loopback names are the same service; any other host is not.
    assert.equal((await record('GET', '/mcp-rest/tools/list', { key: await idp.mint({ sub: 'erin', aud: resource.replace('127.0.0.1', '[::1]') }) })).status, 200);
    assert.equal((await record('GET', '/mcp-rest/tools/list', { key: await idp.mint({ sub: 'erin', aud: resource.replace('127.0.0.1', 'localhost.example') }) })).status, 401);
  });

  test('a claim picks the key template: a user in "interns" sees only what that template allows', async () => {
    const everyone = await idp.mint({ sub: 'carol', aud: resource });
    const intern = await idp.mint({ sub: 'dave', aud: resource, groups: ['staff', 'interns'] });
    const all = await record('GET', '/mcp-rest/tools/list', { key: everyone });
    assert.ok((all.body.tools as any[]).length > 0);
    const narrowed = await record('GET', '/mcp-rest/tools/list', { key: intern });
    assert.equal(narrowed.status, 200);
    assert.deepEqual(narrowed.body.tools, []);
    const refused = await record('POST', '/mcp-rest/tools/call', { key: intern, body: { name: 'fx__echo', arguments: { text: 'x' } } });
    assert.equal(refused.status, 403);
  });

  test('refused: expired, another audience, another issuer, a key the IdP does not publish, unsigned, garbage', async () => {
    const now = Math.floor(Date.now() / 1000);
    const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify({ iss: idp.issuer, sub: 'mallory', aud: resource, exp: now + 600 })).toString('base64url')}.`;
    const cases: [string, string, RegExp][] = [
      ['expired', await idp.mint({ sub: 'alice', aud: resource }, { expiresInSeconds: -120 }), /expired/],
      ['wrong audience', await idp.mint({ sub: 'alice', aud: 'http://elsewhere.example/mcp' }), /audience/],
      ['wrong issuer', await idp.mint({ sub: 'alice', aud: resource, iss: 'http://evil.example/' }), /issuer/],
      ['foreign key', await idp.mint({ sub: 'alice', aud: resource }, { key: 'foreign' }), /invalid access token/],
      ['unsigned', unsigned, /invalid access token/],
      ['garbage', 'abc.def.ghi', /invalid access token/],
    ];
    for (const [what, token, message] of cases) {
      const reply = await record('POST', '/mcp', { key: token, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} } });
      assert.equal(reply.status, 401, `${what}: ${JSON.stringify(reply.body)}`);
      assert.match(reply.body.error.message, message, what);
      const challenge = reply.headers.get('www-authenticate') ?? '';
      assert.match(challenge, /error="invalid_token"/, what);
      assert.match(challenge, /resource_metadata=/, what);
      assert.ok(!JSON.stringify(reply.body).includes(token), `${what}: the token is not echoed`);
    }
  });

  test('JWKS rotation: a token signed with the new key is accepted once the IdP publishes it', async () => {
    const before = idp.counts().jwksFetches;
    await idp.rotate('ES256');
    const token = await idp.mint({ sub: 'erin', aud: resource });
    const reply = await record('GET', '/mcp-rest/tools/list', { key: token });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.ok(idp.counts().jwksFetches > before, 'the unknown kid made toolrouter fetch the keys again');
    // EdDSA too.
    await idp.rotate('EdDSA');
    assert.equal((await record('GET', '/mcp-rest/tools/list', { key: await idp.mint({ sub: 'erin', aud: resource }) })).status, 200);
  });

  test('no token appears in logs, responses or metrics', async () => {
    const metrics = await record('GET', '/metrics', { key: ADMIN_KEY });
    const tokens = idp.issuedTokens();
    assert.ok(tokens.length > 0);
    const places = { logs: logs.join('\n'), responses: responses.join('\n'), metrics: String(metrics.body) };
    for (const [place, text] of Object.entries(places)) for (const token of tokens) assert.ok(!text.includes(token), `a token appears in ${place}`);
    // Users are named in logs by a hash, never by their subject.
    assert.ok(!places.metrics.includes('alice'));
  });
});
