/**
 * Issue 54: a proxied turn is filed before its caller has the whole answer. forwardRequest over a real HTTP stand-in
 * upstream and a real express route: the settle hook runs while the caller still lacks the body's last bytes (not
 * streamed) or the terminal event (streamed), after the caller got the tokens before it; a settle slower than its
 * bound does not hold the reply.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import pino from 'pino';
import { forwardRequest, type ForwardHooks } from '../../../src/chat/core/proxy.js';
import { completion, startStandInLlm, type StandInLlm } from '../../helpers/stand-in-llm.js';

const log = pino({ level: 'silent' });

describe('forwardRequest: filing before the end of the answer', () => {
  let llm: StandInLlm;
  let server: import('node:http').Server;
  let base: string;
  let hooks: () => ForwardHooks<unknown>;

  before(async () => {
    llm = await startStandInLlm();
    const app = express();
    app.use(express.json());
    app.post('/v1/chat/completions', async (req, res) => {
      await forwardRequest(req, res, JSON.stringify(req.body), { url: llm.url, route: { endpoint: 'chat/completions' }, keyHeader: 'authorization', timeoutMs: 10_000 }, log, hooks());
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.close();
    await llm.close();
  });

  /** Posts and reads the answer as it comes; `seen()` is what the caller has so far. */
  function call(): { seen: () => string; done: Promise<string> } {
    let text = '';
    const done = (async () => {
      const response = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [] }) });
      const decoder = new TextDecoder();
      for await (const chunk of response.body!) text += decoder.decode(chunk, { stream: true });
      return text;
    })();
    return { seen: () => text, done };
  }

  /** Lets whatever was written reach the caller (no assertion on time: a slow machine only makes the test weaker). */
  const settleTime = () => new Promise((resolve) => setTimeout(resolve, 150));

  it('streamed: the caller has the tokens but not [DONE] when the turn is filed', async () => {
    const events = ['{"choices":[{"delta":{"content":"Hel"}}]}', '{"choices":[{"delta":{"content":"lo"}}]}', '{"choices":[{"delta":{},"finish_reason":"stop"}]}'];
    llm.respond(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const event of events) {
        res.write(`data: ${event}\n\n`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      res.end('data: [DONE]\n\n');
    });
    let atFiling: string | undefined;
    let observed = '';
    const { seen, done } = call();
    hooks = () => ({
      observe: () => ({ push: (chunk) => (observed += Buffer.from(chunk).toString('utf8')) }),
      settle: async () => {
        await settleTime();
        atFiling = seen();
      },
      settleTimeoutMs: 5_000,
    });
    const whole = await done;
    assert.ok(observed.includes('[DONE]'), 'the observer had the whole answer when filing');
    assert.ok(atFiling !== undefined, 'settle ran');
    assert.ok(atFiling.includes('"Hel"') && atFiling.includes('"lo"'), `the tokens were passed on before filing: ${atFiling}`);
    assert.ok(!atFiling.includes('[DONE]'), 'the terminal event waited for the filing');
    assert.ok(whole.endsWith('data: [DONE]\n\n'));
  });

  it('not streamed: the caller has not the whole body when the turn is filed', async () => {
    const body = JSON.stringify(completion('x'.repeat(200_000)));
    llm.respond(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      // In pieces, as a large body arrives.
      for (let at = 0; at < body.length; at += 50_000) {
        res.write(body.slice(at, at + 50_000));
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      res.end();
    });
    let atFiling: string | undefined;
    const { seen, done } = call();
    hooks = () => ({
      observe: () => ({ push: () => {} }),
      settle: async () => {
        await settleTime();
        atFiling = seen();
      },
    });
    assert.equal(await done, body);
    assert.ok(atFiling !== undefined && atFiling.length < body.length, `the body's end waited for the filing (${atFiling?.length} of ${body.length})`);
  });

  it('a filing slower than its bound does not hold the reply', async () => {
    llm.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(completion('quick')));
    });
    let filed = false;
    hooks = () => ({ settle: () => new Promise<void>((resolve) => setTimeout(() => ((filed = true), resolve()), 60_000).unref()), settleTimeoutMs: 50 });
    const { done } = call();
    assert.equal(JSON.parse(await done).choices[0].message.content, 'quick');
    assert.equal(filed, false, 'answered before the slow filing ended');
  });
});
