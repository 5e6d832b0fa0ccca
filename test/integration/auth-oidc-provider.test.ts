import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startOidcIdentityProvider, type OidcIdentityProvider } from '../fixtures/oidc-identity-provider.js';
import { ADMIN_KEY, call } from '../helpers/keys.js';
import { stdioFixtureServer, waitFor } from '../helpers/mcp.js';
import { freePort } from '../helpers/redis-server.js';
import { closeListening } from '../helpers/router.js';

/**
 * The walk-through of docs' inbound OAuth with `oidc-provider` as the identity provider, as a user sets it up: only
 * `issuer` and `audience` configured (no `resource`, no `requiredScopes`), an MCP SDK client that knows nothing but
 * toolrouter's URL, on `localhost` while the audience names 127.0.0.1. It registers itself, signs in through the
 * provider, gets a JWT access token for toolrouter and calls a tool with it.
 */
class MemoryClientProvider implements OAuthClientProvider {
  readonly redirectUrl = 'http://127.0.0.1:9/callback';
  authorizationUrl: URL | undefined;
  private client: OAuthClientInformationMixed | undefined;
  private saved: OAuthTokens | undefined;
  private verifier = '';
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'oidc-walk-through', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'none' };
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

describe('inbound OAuth with oidc-provider: sign in and call a tool', { timeout: 180_000 }, () => {
  let idp: OidcIdentityProvider;
  let router: Toolrouter;
  let server: Server;
  let port: number;

  before(async () => {
    port = await freePort();
    idp = await startOidcIdentityProvider({ resource: `http://localhost:${port}/mcp` });
    const config = loadConfig(
      {},
      {
        port,
        host: '127.0.0.1',
        adminKey: ADMIN_KEY,
        auth: { oauth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp` } },
        mcp: { search: false, startupWaitMs: 5_000, pingIntervalMs: 0, servers: { fx: stdioFixtureServer() } },
      },
    );
    router = await createToolrouter(config, { log: createLogger('silent') });
    server = await listen(router);
    await waitFor('fx connected', () => router.mcp.upstreams.status().every((status) => status.state === 'connected'), 60_000);
  });

  after(async () => {
    await closeListening(router, server);
    await idp?.close();
  });

  test('register, authorize with PKCE, a JWT access token for toolrouter, a tool call with it', async () => {
    const resource = `http://localhost:${port}/mcp`;
    idp.loginAs('alice');
    const provider = new MemoryClientProvider();
    const transport = new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider });
    await assert.rejects(new Client({ name: 'walk-through', version: '1.0.0' }).connect(transport), UnauthorizedError);
    const authorization = provider.authorizationUrl!;
    assert.equal(authorization.origin, idp.issuer);
    assert.equal(authorization.searchParams.get('resource'), resource);
    assert.equal(authorization.searchParams.get('scope'), 'openid', 'the scope toolrouter advertises; with none, oidc-provider answers access_denied');
    await transport.finishAuth(await idp.authorize(authorization, provider.redirectUrl));
    const token = provider.tokens()!.access_token;
    assert.equal(token.split('.').length, 3, 'a JWT: toolrouter verifies access tokens locally against the JWKS');
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { sub: string; aud: string; iss: string };
    assert.deepEqual([claims.sub, claims.aud, claims.iss], ['alice', resource, idp.issuer]);

    const client = new Client({ name: 'walk-through', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }));
    try {
      const result = await client.callTool({ name: 'fx__echo', arguments: { text: 'hello from oidc-provider' } });
      assert.match(JSON.stringify(result.content), /hello from oidc-provider/);
    } finally {
      await client.close();
    }
    // The token on REST too, at either loopback name.
    assert.equal((await call(`http://127.0.0.1:${port}`, 'GET', '/mcp-rest/tools/list', { key: token })).status, 200);
  });
});
