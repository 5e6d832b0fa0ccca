import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { Sealer } from '../../src/mcp/upstream/oauth/crypto.js';

describe('OAuth records at rest (AES-256-GCM)', () => {
  const sealer = new Sealer('a-secret-key-of-some-length');
  const record = JSON.stringify({ tokens: { access_token: 'at_secret_value', refresh_token: 'rt_secret_value' } });

  test('opens what it sealed, and the sealed text shows nothing of the record', () => {
    const sealed = sealer.seal(record, 'tr:oauth:server:gh');
    assert.match(sealed, /^v1\.[A-Za-z0-9_-]+$/);
    assert.ok(!sealed.includes('secret_value'));
    assert.equal(sealer.open(sealed, 'tr:oauth:server:gh'), record);
    assert.notEqual(sealer.seal(record, 'tr:oauth:server:gh'), sealed, 'a fresh IV per seal');
  });

  test('refuses another key, another record name, and any changed byte', () => {
    const sealed = sealer.seal(record, 'tr:oauth:server:gh');
    assert.throws(() => new Sealer('another-secret-key-entirely').open(sealed, 'tr:oauth:server:gh'));
    assert.throws(() => sealer.open(sealed, 'tr:oauth:server:other'), 'moved under another server');
    const bytes = Buffer.from(sealed.slice(3), 'base64url');
    bytes[bytes.length - 1] = bytes.at(-1)! ^ 1;
    assert.throws(() => sealer.open(`v1.${bytes.toString('base64url')}`, 'tr:oauth:server:gh'));
    assert.throws(() => sealer.open('plain text', 'tr:oauth:server:gh'), /not a sealed OAuth record/);
  });
});

describe('auth: oauth in mcp.servers', () => {
  const url = 'https://mcp.example.com/mcp';

  test('"oauth" is the authorization code grant with dynamic registration', () => {
    const config = loadConfig({}, { mcp: { servers: { gh: { url, auth: 'oauth' } } } });
    assert.deepEqual((config.mcp.servers.gh as { auth?: unknown }).auth, { type: 'oauth', grant: 'authorization_code' });
  });

  test('the long form keeps client, grant and scope; TOOLROUTER_SECRET_KEY lands in mcp.oauth.secretKey', () => {
    const auth = { type: 'oauth', grant: 'client_credentials', clientId: 'svc', clientSecret: 's3cret', scope: 'read' };
    const config = loadConfig({ TOOLROUTER_SECRET_KEY: 'sixteen-chars-or-more' }, { mcp: { servers: { svc: { url, auth } } } });
    assert.deepEqual((config.mcp.servers.svc as { auth?: unknown }).auth, auth);
    assert.equal(config.mcp.oauth.secretKey, 'sixteen-chars-or-more');
  });

  test('bad values are refused naming the field', () => {
    assert.throws(() => loadConfig({}, { mcp: { servers: { gh: { url, auth: { type: 'oauth', grant: 'password' } } } } }), (error: ConfigError) => /mcp\.servers\.gh/.test(error.message));
    assert.throws(() => loadConfig({}, { mcp: { servers: { gh: { command: 'x', auth: 'oauth' } } } }), /mcp\.servers\.gh/);
    assert.throws(() => loadConfig({ TOOLROUTER_SECRET_KEY: 'short' }, {}), /mcp\.oauth\.secretKey: must be at least 16 characters/);
  });
});
