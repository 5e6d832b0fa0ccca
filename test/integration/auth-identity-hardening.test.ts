import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { JWTPayload } from 'jose';
import { TokenVerifier } from '../../src/auth/identity/verifier.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startIdentityProvider, type IdentityProvider } from '../fixtures/identity-provider.js';
import { ADMIN_KEY, call } from '../helpers/keys.js';
import { freePort } from '../helpers/redis-server.js';
import { closeListening } from '../helpers/router.js';
import { startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';

/**
 * Inbound OAuth under hostile tokens and a failing identity provider: a `sub` that is not a non-empty string is a 401
 * naming the claim on every face (issue 50, item 4), and the cached signing keys keep verifying while the IdP's JWKS is
 * down or slow (stale-if-error, item 2). The IdP is the real fixture; its JWKS is reached through a small local relay the
 * test can take down or slow down.
 */

/** A JWKS server in front of the IdP's: `up` relays, `down` answers 503, `slow` answers only after 20 s. */
async function startJwksRelay(target: string): Promise<{ url: string; mode: 'up' | 'down' | 'slow'; fetches: number; close(): Promise<void> }> {
  const relay = { url: '', mode: 'up' as 'up' | 'down' | 'slow', fetches: 0, close: async () => {} };
  const held = new Set<NodeJS.Timeout>();
  const server: Server = createServer(async (req, res) => {
    relay.fetches++;
    if (relay.mode === 'down') {
      res.writeHead(503).end('down');
      return;
    }
    if (relay.mode === 'slow') {
      const timer = setTimeout(() => res.destroy(), 20_000);
      held.add(timer);
      res.on('close', () => (clearTimeout(timer), held.delete(timer)));
      return;
    }
    const upstream = await fetch(target);
    res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(await upstream.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  relay.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/jwks`;
  relay.close = async () => {
    for (const timer of held) clearTimeout(timer);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return relay;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('identity hardening: subjects and JWKS outages', () => {
  let idp: IdentityProvider;

  before(async () => {
    idp = await startIdentityProvider();
  });
  after(async () => {
    await idp?.close();
  });

  describe('a sub that is not a non-empty string is refused on every face', () => {
    let router: Toolrouter;
    let server: Server;
    let llm: StandInLlm;
    let base: string;
    let resource: string;

    before(async () => {
      llm = await startStandInLlm();
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      resource = `${base}/mcp`;
      const config = loadConfig(
        {},
        {
          port,
          host: '127.0.0.1',
          adminKey: ADMIN_KEY,
          upstreamLlmUrl: llm.url,
          auth: { oauth: { issuer: idp.issuer, audience: resource } },
          mcp: { search: false, pingIntervalMs: 0, servers: {} },
        },
      );
      router = await createToolrouter(config, { log: createLogger('silent') });
      server = await listen(router);
    });
    after(async () => {
      await closeListening(router, server);
      await llm?.close();
    });

    test('12345, true, an object, ["alice"], "" and 300 characters: 401 naming sub on REST, /mcp and the chat proxy', async () => {
      const subjects: unknown[] = [12345, true, { id: 'alice' }, ['alice'], '', 'a'.repeat(300)];
      const faces: [string, string, unknown][] = [
        ['REST', '/mcp-rest/tools/list', undefined],
        ['/mcp', '/mcp', { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }],
        ['chat proxy', '/v1/chat/completions', { model: 'stand-in', messages: [{ role: 'user', content: 'hi' }] }],
      ];
      for (const sub of subjects) {
        const token = await idp.mint({ sub, aud: resource } as unknown as JWTPayload & { sub: string; aud: string });
        for (const [face, path, body] of faces) {
          // The chat proxy takes toolrouter's credential in x-toolrouter-key (Authorization is the LLM provider's).
          const credential = face === 'chat proxy' ? { headers: { 'x-toolrouter-key': token } } : { key: token };
          const reply = await call(base, body === undefined ? 'GET' : 'POST', path, { ...credential, ...(body === undefined ? {} : { body }) });
          const what = `${face} with sub ${JSON.stringify(sub).slice(0, 40)}`;
          assert.equal(reply.status, 401, `${what}: ${JSON.stringify(reply.body).slice(0, 300)}`);
          assert.match(JSON.stringify(reply.body), /subject claim \(sub\)/, what);
        }
      }
      assert.equal(llm.received.length, 0, 'nothing reached the LLM');
      // A string subject still works.
      const fine = await call(base, 'GET', '/mcp-rest/tools/list', { key: await idp.mint({ sub: 'alice', aud: resource }) });
      assert.equal(fine.status, 200, JSON.stringify(fine.body));
    });
  });

  describe('stale-if-error: cached keys verify while the JWKS is down or slow', () => {
    const audience = 'http://127.0.0.1:1/mcp';
    const warnings: string[] = [];
    const notes: string[] = [];
    const log = { warn: (_o: object, message: string) => void warnings.push(message), info: (_o: object, message: string) => void notes.push(message) };
    let relay: Awaited<ReturnType<typeof startJwksRelay>>;

    before(async () => {
      relay = await startJwksRelay(idp.jwksUri);
    });
    after(async () => {
      await relay?.close();
    });

    test('down, then slow: a user whose key is cached stays signed in, with one warning; the keys come back in the background', async () => {
      const verifier = new TokenVerifier({
        issuer: idp.issuer,
        audience,
        jwksUri: relay.url,
        requiredScopes: [],
        algorithms: ['RS256', 'ES256', 'EdDSA'],
        clockToleranceSeconds: 5,
        jwksCooldownMs: 0,
        jwksMaxAgeMs: 1_000,
        jwksMaxStaleMs: 60_000,
        log,
      });
      const token = await idp.mint({ sub: 'alice', aud: audience });
      assert.equal((await verifier.verify(token)).subject, 'alice');

      relay.mode = 'down';
      await sleep(1_300);
      for (let i = 0; i < 3; i++) assert.equal((await verifier.verify(token)).subject, 'alice', 'still signed in while the JWKS answers 503');
      await sleep(200);
      assert.equal(warnings.length, 1, `one warning for the outage: ${JSON.stringify(warnings)}`);

      relay.mode = 'slow';
      await sleep(1_100);
      const started = performance.now();
      assert.equal((await verifier.verify(token)).subject, 'alice');
      assert.ok(performance.now() - started < 2_000, 'a slow JWKS does not hold the request');
      assert.equal(warnings.length, 1, 'still one warning');

      relay.mode = 'up';
      const fetched = relay.fetches;
      await sleep(5_500);
      await verifier.verify(token);
      await sleep(500);
      assert.ok(relay.fetches > fetched, 'refetched in the background once the JWKS answers');
      assert.ok(notes.some((note) => /again/.test(note)), 'its end is noted');
    });

    test('bounded: past jwksMaxStaleMs the stale keys stop verifying (503, the IdP cannot be reached)', async () => {
      relay.mode = 'up';
      const verifier = new TokenVerifier({
        issuer: idp.issuer,
        audience,
        jwksUri: relay.url,
        requiredScopes: [],
        algorithms: ['RS256'],
        clockToleranceSeconds: 5,
        jwksCooldownMs: 0,
        jwksMaxAgeMs: 1_000,
        jwksMaxStaleMs: 1_000,
      });
      const token = await idp.mint({ sub: 'bob', aud: audience });
      await verifier.verify(token);
      relay.mode = 'down';
      await sleep(2_300);
      await assert.rejects(verifier.verify(token), (error: { code?: string }) => error.code === 'auth_unavailable');
    });
  });
});
