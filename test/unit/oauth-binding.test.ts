import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Access } from '../../src/auth/access.js';
import type { KeyRecord } from '../../src/auth/keys.js';
import { bindingCookie, bindingMatches, connectUrl, cookieName, hashBinding, isStarter, randomToken, readCookie } from '../../src/mcp/upstream/oauth/binding.js';

/**
 * Who may pass an authorization's connect page (src/mcp/upstream/oauth/binding.ts), and the cookie that ties the
 * callback to the browser that passed it. The walk through real browsers and a real authorization server is
 * test/integration/mcp-oauth-binding.test.ts; these are the rules case by case.
 */

const key = (keyId: string, assertUser = false): KeyRecord => ({ keyId, secretHash: `hash-${keyId}`, toolSearchEnabled: true, createdAt: 0, ...(assertUser ? { assertUser } : {}) });

describe('connect page: the flow\'s starter, and no one else', () => {
  const bob = Access.forKey(key('bob'));
  const alice = Access.forKey(key('alice'));
  const service = Access.forKey(key('svc', true));
  const otherService = Access.forKey(key('svc2', true));
  const aliceSignedIn = Access.forUser(key('template'), 'alice');
  const bobSignedIn = Access.forUser(key('template-b'), 'bob');

  test('the shared grant: the admin key only', () => {
    assert.equal(isStarter(Access.admin, {}), true);
    assert.equal(isStarter(bob, {}), false);
    assert.equal(isStarter(service, {}), false);
    assert.equal(isStarter(aliceSignedIn, {}), false);
  });

  test('a key\'s own grant: that key; not another key, not the admin, not an assert_user key naming it', () => {
    const flow = { subject: 'key:bob', keyId: 'bob' };
    assert.equal(isStarter(bob, flow), true);
    assert.equal(isStarter(alice, flow), false);
    assert.equal(isStarter(Access.admin, flow), false);
    assert.equal(isStarter(service, flow), false);
  });

  test('a signed-in user\'s grant: that user, or the assert_user key that started it for them', () => {
    const started = { subject: 'user:alice' };
    assert.equal(isStarter(aliceSignedIn, started), true);
    assert.equal(isStarter(bobSignedIn, started), false);
    const forAlice = { subject: 'user:alice', keyId: 'svc' };
    assert.equal(isStarter(service, forAlice), true);
    assert.equal(isStarter(aliceSignedIn, forAlice), true, 'alice herself');
    assert.equal(isStarter(otherService, forAlice), false, 'another service\'s assert_user key');
    assert.equal(isStarter(bob, forAlice), false);
    // An assert_user key naming alice on the page would be client-supplied identity: the page never reads a user name.
    assert.equal(isStarter(service.asUser('alice'), { subject: 'user:alice' }), false, 'without the starting key id, an asserted user proves nothing');
  });
});

describe('the binding cookie', () => {
  test('one per flow, HttpOnly, SameSite=Lax, scoped to the callback\'s path, Secure over https', () => {
    const state = randomToken();
    const binding = randomToken();
    const cookie = bindingCookie(state, binding, 'https://tr.example.com/base/oauth/callback', 600_000);
    assert.match(cookie, new RegExp(`^${cookieName(state)}=${binding}; Path=/base/oauth/callback; Max-Age=600; HttpOnly; SameSite=Lax; Secure$`));
    assert.doesNotMatch(bindingCookie(state, binding, 'http://127.0.0.1:8080/oauth/callback', 1_000), /Secure/);
    assert.notEqual(cookieName(state), cookieName(randomToken()), 'two flows in one browser do not overwrite each other');
  });

  test('read back only as the flow\'s own, well-formed value; compared against the stored hash', () => {
    const state = randomToken();
    const binding = randomToken();
    const name = cookieName(state);
    const header = `other=1; ${cookieName(randomToken())}=${randomToken()}; ${name}=${binding}`;
    assert.equal(readCookie(header, name), binding);
    assert.equal(bindingMatches(readCookie(header, name), hashBinding(binding)), true);
    assert.equal(bindingMatches(randomToken(), hashBinding(binding)), false);
    assert.equal(bindingMatches(undefined, hashBinding(binding)), false);
    assert.equal(bindingMatches(binding, undefined), false, 'a flow without a binding is never completed');
    assert.equal(readCookie(`${name}=not a token`, name), undefined);
    assert.equal(readCookie(undefined, name), undefined);
  });

  test('the connect link sits beside the callback, under a proxy\'s path prefix too', () => {
    assert.equal(connectUrl('https://tr.example.com/base/oauth/callback', 'abc'), 'https://tr.example.com/base/oauth/connect/abc');
    assert.equal(connectUrl('http://127.0.0.1:8080/oauth/callback', 'abc'), 'http://127.0.0.1:8080/oauth/connect/abc');
  });
});
