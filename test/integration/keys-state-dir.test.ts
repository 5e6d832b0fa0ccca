import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { KEYS_FILE } from '../../src/auth/key-store.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { startRouter } from '../helpers/router.js';

describe('virtual keys without Redis are kept in stateDir', () => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'toolrouter-keys-'));
  after(() => rmSync(stateDir, { recursive: true, force: true }));
  const settings = { adminKey: ADMIN_KEY, stateDir, redis: { url: undefined } };

  test('a key made before a restart still works after it; a key deleted before it stays deleted', async () => {
    const first = await startRouter(settings);
    let kept: string;
    let deleted: string;
    try {
      kept = (await generateKey(first.url, { key_alias: 'kept' })).key;
      const doomed = await generateKey(first.url, { key_alias: 'doomed' });
      deleted = doomed.key;
      assert.equal((await call(first.url, 'POST', '/key/delete', { key: ADMIN_KEY, body: { keys: [doomed.key_id] } })).status, 200);
    } finally {
      await first.close();
    }
    const file = path.join(stateDir, KEYS_FILE);
    assert.equal(statSync(file).mode & 0o777, 0o600, 'the key file is readable by its owner only');
    assert.ok(!readFileSync(file, 'utf8').includes(kept), 'the secret itself is never written, only its hash');

    const second = await startRouter(settings);
    try {
      assert.equal((await call(second.url, 'GET', '/v1/mcp/servers', { key: kept })).status, 200, 'the kept key authenticates after the restart');
      assert.equal((await call(second.url, 'GET', '/v1/mcp/servers', { key: deleted })).status, 401, 'the deleted key does not come back');
      const listed = await call(second.url, 'GET', '/key/list', { key: ADMIN_KEY });
      assert.deepEqual(JSON.stringify(listed.body).match(/"kept"|"doomed"/g), ['"kept"']);
    } finally {
      await second.close();
    }
  });

  test('a key file that is not valid stops the start instead of starting without its keys', async () => {
    const broken = mkdtempSync(path.join(tmpdir(), 'toolrouter-keys-broken-'));
    try {
      writeFileSync(path.join(broken, KEYS_FILE), '{"keys": [');
      await assert.rejects(startRouter({ ...settings, stateDir: broken }), /key file .*keys\.json is not valid/);
    } finally {
      rmSync(broken, { recursive: true, force: true });
    }
  });
});
