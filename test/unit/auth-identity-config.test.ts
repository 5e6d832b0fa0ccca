import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { bearerChallenge, metadataUrlFor } from '../../src/auth/identity/metadata.js';

const ADMIN = 'admin-key-of-sixteen-plus';

test('auth.oauth: defaults, and refusals naming the setting', () => {
  const config = loadConfig({}, { adminKey: ADMIN, auth: { oauth: { issuer: 'https://login.example/', audience: 'https://tr.example/mcp' } } });
  assert.deepEqual(config.auth.oauth?.algorithms, ['RS256', 'ES256', 'EdDSA']);
  assert.equal(config.auth.oauth?.jwksCooldownMs, 30_000);
  assert.throws(() => loadConfig({}, { auth: { oauth: { issuer: 'https://login.example/', audience: 'a' } } }), /auth\.oauth: auth\.oauth needs adminKey/);
  assert.throws(() => loadConfig({}, { adminKey: ADMIN, auth: { oauth: { issuer: 'https://login.example/', audience: 'a', algorithms: ['HS256'] } } }), /auth\.oauth\.algorithms/);
  assert.throws(() => loadConfig({}, { adminKey: ADMIN, auth: { oauth: { issuer: 'https://login.example/', audience: 'a', bogus: 1 } } }), /auth\.oauth\.bogus: unknown setting/);
});

test('perUser needs the authorization_code grant; passthroughHeaders are header names, never authorization beside OAuth', () => {
  const url = 'https://mcp.example/mcp';
  const config = loadConfig({}, { mcp: { servers: { a: { url, auth: { type: 'oauth', perUser: true }, passthroughHeaders: ['x-api-key'] } } } });
  assert.equal((config.mcp.servers.a as { auth?: { perUser?: boolean } }).auth?.perUser, true);
  assert.deepEqual((config.mcp.servers.a as { passthroughHeaders?: string[] }).passthroughHeaders, ['x-api-key']);
  for (const auth of [{ type: 'oauth', perUser: true }, 'oauth']) {
    assert.throws(
      () => loadConfig({}, { mcp: { servers: { a: { url, auth, passthroughHeaders: ['x-api-key', 'Authorization'] } } } }),
      /mcp\.servers\.a\.passthroughHeaders: cannot pass "authorization" through to a server with auth: oauth/,
    );
  }
  assert.doesNotThrow(() => loadConfig({}, { mcp: { servers: { a: { url, passthroughHeaders: ['authorization'] } } } }), 'without auth a caller brings its own token');
  assert.throws(() => loadConfig({}, { mcp: { servers: { a: { url, auth: { type: 'oauth', grant: 'client_credentials', perUser: true } } } } }), /mcp\.servers\.a\.auth\.perUser/);
  assert.throws(() => loadConfig({}, { mcp: { servers: { a: { url, passthroughHeaders: ['bad header\n'] } } } }), /passthroughHeaders/);
});

test('the challenge names the metadata URL (RFC 9728 path form) and never lets a quote through', () => {
  assert.equal(metadataUrlFor('https://tr.example/mcp'), 'https://tr.example/.well-known/oauth-protected-resource/mcp');
  assert.equal(metadataUrlFor('https://tr.example/'), 'https://tr.example/.well-known/oauth-protected-resource');
  const challenge = bearerChallenge('https://tr.example/mcp', { error: 'invalid_token', description: 'bad "quoted" \\ text' });
  assert.equal(challenge, 'Bearer resource_metadata="https://tr.example/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="bad  quoted    text"');
});
