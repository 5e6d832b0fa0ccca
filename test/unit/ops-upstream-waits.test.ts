import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { needsPerson, Reconnection } from '../../src/mcp/upstream/reconnection.js';

describe('upstreams that wait for a person (issue 43)', () => {
  it('names what is needed for a missing grant, a revoked one, a missing secret key and a command that cannot run', () => {
    assert.match(needsPerson({ reason: 'HTTP 401', authorization: { reason: 'never_connected', message: 'not authorized yet' } })!, /authorize.*not authorized yet/);
    assert.match(needsPerson({ reason: 'HTTP 401', authorization: { reason: 'revoked', message: 'grant revoked' } })!, /grant revoked/);
    assert.match(needsPerson({ reason: 'x', refusal: 'not started: ... TOOLROUTER_SECRET_KEY, which is not set' })!, /TOOLROUTER_SECRET_KEY/);
    assert.match(needsPerson({ reason: 'spawn /nonexistent/mcp-server ENOENT' })!, /configuration fix/);
    assert.match(needsPerson({ reason: 'spawn ./server.sh EACCES' })!, /configuration fix/);
  });

  it('leaves to the retries what may pass by itself: a failed refresh, a refused connection, a timeout', () => {
    assert.equal(needsPerson({ reason: 'HTTP 401', authorization: { reason: 'refresh_failed', message: 'token endpoint down' } }), undefined);
    assert.equal(needsPerson({ reason: 'fetch failed: connect ECONNREFUSED 127.0.0.1:9' }), undefined);
    assert.equal(needsPerson({ reason: 'Request timed out' }), undefined);
    assert.equal(needsPerson({ reason: 'ENOENT somewhere unrelated to spawning' }), undefined);
  });

  it('a parked connection schedules nothing and counts the failure; failed() schedules a retry', async () => {
    const reconnection = new Reconnection({ reconnect: { initialMs: 10, maxMs: 20 }, pingIntervalMs: 0 });
    let retried = 0;
    reconnection.failed(() => retried++);
    assert.ok(reconnection.retryAt !== undefined);
    reconnection.park();
    assert.equal(reconnection.retryAt, undefined);
    assert.equal(reconnection.failures, 2);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(retried, 0, 'the retry scheduled before parking was cancelled');
    reconnection.failed(() => retried++);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(retried, 1);
    reconnection.stop();
  });
});
