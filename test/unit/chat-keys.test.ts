import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import OpenAI from 'openai';
import type { Tool } from '../../src/catalog/types.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { MODEL_LIST, completion, jsonBody, postJson, responseObject, scripted, startStandInLlm, toolCallCompletion, type StandInLlm } from '../helpers/stand-in-llm.js';

const TOOLS = fixtureTools().map((tool: Tool) => ({
  type: 'function' as const,
  function: { name: tool.name, description: tool.description ?? '', parameters: tool.inputSchema as Record<string, unknown> },
}));
const RESPONSES_TOOLS = fixtureTools().map((tool: Tool) => ({
  type: 'function' as const,
  name: tool.name,
  description: tool.description ?? '',
  parameters: tool.inputSchema as Record<string, unknown>,
  strict: false,
}));
const PROVIDER_KEY = 'sk-provider-0123456789';
const messages = [{ role: 'user' as const, content: 'Email Bob the quarterly report summary.' }];

/**
 * The README's TypeScript example, as a function of what it reads from the environment: the official `openai` client
 * with toolrouter as its base URL, the provider's key as its API key, and toolrouter's key (only needed with ADMIN_KEY)
 * in `x-toolrouter-key`.
 */
async function readmeExample(env: { TOOLROUTER_URL: string; OPENAI_API_KEY: string; TOOLROUTER_KEY?: string }) {
  const client = new OpenAI({
    baseURL: `${env.TOOLROUTER_URL}/v1`,
    apiKey: env.OPENAI_API_KEY,
    defaultHeaders: env.TOOLROUTER_KEY ? { 'x-toolrouter-key': env.TOOLROUTER_KEY } : {},
  });
  const models = await client.models.list();
  const chat = await client.chat.completions.create({ model: 'gpt-4.1', messages, tools: TOOLS });
  const stream = await client.responses.create({ model: 'gpt-4.1', input: 'Email Bob the quarterly report summary.', tools: RESPONSES_TOOLS, stream: true });
  const events: string[] = [];
  for await (const event of stream) events.push(event.type);
  return { models: models.data.map((model) => model.id), chat, events };
}

/** Every proxy refusal is OpenAI-shaped: error.type, error.code, error.message (and param). */
function assertOpenAiError(body: any, code: string) {
  assert.equal(typeof body?.error?.message, 'string', JSON.stringify(body));
  assert.equal(typeof body.error.type, 'string');
  assert.equal(body.error.code, code, JSON.stringify(body));
  assert.ok('param' in body.error);
}

describe('proxy keys and the openai client', () => {
  let llm: StandInLlm;

  before(async () => {
    llm = await startStandInLlm();
  });
  after(async () => {
    await llm.close();
  });
  beforeEach(() => llm.reset());

  /** The upstream got the provider's key and nothing of toolrouter's. */
  function assertProviderKeyForwarded() {
    assert.ok(llm.received.length >= 3);
    for (const request of llm.received) {
      assert.equal(request.headers.authorization, `Bearer ${PROVIDER_KEY}`, request.url);
      assert.equal(request.headers['x-toolrouter-key'], undefined);
    }
  }

  describe('without ADMIN_KEY', () => {
    let api: RunningRouter;
    before(async () => {
      api = await startRouter({ upstreamLlmUrl: llm.url });
      await api.indexed();
    });
    after(async () => {
      await api.close();
    });

    it('runs the README example: models are listed, tools trimmed, the stream read', async () => {
      llm.respond((req, res) => {
        const path = req.url.split('?')[0]!;
        if (path.endsWith('/responses')) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const done = { type: 'response.completed', sequence_number: 1, response: responseObject('ok') };
          const created = { type: 'response.created', sequence_number: 0, response: { ...responseObject('ok'), status: 'in_progress', output: [] } };
          res.end([created, done].map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join(''));
        } else if (path.endsWith('/models')) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(MODEL_LIST));
        } else {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(completion('sent')));
        }
      });
      const result = await readmeExample({ TOOLROUTER_URL: api.url, OPENAI_API_KEY: PROVIDER_KEY });
      assert.deepEqual(result.models, ['stand-in']);
      assert.equal(result.chat.choices[0]!.message.content, 'sent');
      assert.deepEqual(result.events, ['response.created', 'response.completed']);
      assertProviderKeyForwarded();
      const chatRequest = llm.received.find((request) => request.url.endsWith('/chat/completions'))!;
      assert.ok(chatRequest.json.tools.length < TOOLS.length, 'the tools were trimmed');
    });

    it('passes GET /v1/models and other unknown /v1 routes through, and keeps its own /v1 routes', async () => {
      const models = await fetch(`${api.url}/v1/models`, { headers: { authorization: `Bearer ${PROVIDER_KEY}` } });
      assert.equal(models.status, 200);
      assert.deepEqual(await models.json(), MODEL_LIST);
      assert.equal(llm.received[0]!.method, 'GET');
      assert.equal(llm.received[0]!.url, '/v1/models');

      const embeddings = await fetch(`${api.url}/v1/embeddings?x=1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"input": "hi",  "model":"e"}' });
      assert.equal(embeddings.status, 200);
      assert.equal(llm.received[1]!.url, '/v1/embeddings?x=1');
      assert.deepEqual(llm.received[1]!.json, { input: 'hi', model: 'e' });
      const upload = await fetch(`${api.url}/v1/audio/transcriptions`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: 'RIFF-bytes' });
      assert.equal(upload.status, 200);
      assert.equal(llm.received[2]!.raw.toString(), 'RIFF-bytes', 'a non-JSON body goes as the very bytes');
      assert.equal(llm.received[2]!.headers['content-type'], 'application/octet-stream');

      const own = await call(api.url, 'POST', '/v1/tools/search', { body: { query: 'send an email' } });
      assert.equal(own.status, 200);
      const ownWrongMethod = await call(api.url, 'GET', '/v1/tools/search');
      assert.equal(ownWrongMethod.status, 404);
      assert.equal(ownWrongMethod.body.error.code, 'not_found', 'toolrouter routes keep their own errors');
      assert.equal(llm.received.length, 3, 'nothing of toolrouter’s own went upstream');
    });
  });

  describe('with ADMIN_KEY', () => {
    let api: RunningRouter;
    before(async () => {
      api = await startRouter({ upstreamLlmUrl: llm.url, adminKey: ADMIN_KEY, security: { authFailuresPerIpPerMinute: 5 } });
    });
    after(async () => {
      await api.close();
    });

    it('runs the README example with the toolrouter key in x-toolrouter-key and forwards the provider key', async () => {
      const { key } = await generateKey(api.url, {});
      llm.reset();
      llm.respond((req, res) => {
        const path = req.url.split('?')[0]!;
        res.writeHead(200, { 'content-type': path.endsWith('/responses') ? 'text/event-stream' : 'application/json' });
        if (path.endsWith('/models')) res.end(JSON.stringify(MODEL_LIST));
        else if (path.endsWith('/responses')) res.end(`event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', sequence_number: 0, response: responseObject() })}\n\n`);
        else res.end(JSON.stringify(completion()));
      });
      const result = await readmeExample({ TOOLROUTER_URL: api.url, OPENAI_API_KEY: PROVIDER_KEY, TOOLROUTER_KEY: key });
      assert.deepEqual(result.models, ['stand-in']);
      assert.deepEqual(result.events, ['response.completed']);
      assertProviderKeyForwarded();
    });

    it("refuses a request with only the provider's key, saying where toolrouter's key goes", async () => {
      const client = new OpenAI({ baseURL: `${api.url}/v1`, apiKey: PROVIDER_KEY, maxRetries: 0 });
      await assert.rejects(client.models.list(), (error: any) => {
        assert.equal(error.status, 401);
        assert.equal(error.code, 'missing_api_key');
        assert.match(error.message, /x-toolrouter-key/);
        return true;
      });
      assert.equal(llm.received.length, 0);
    });

    it('reports a wrong key as wrong, on the proxy and on toolrouter’s own routes', async () => {
      const proxy = await postJson(`${api.url}/v1/chat/completions`, { model: 'm', messages }, { 'x-toolrouter-key': 'sk-tr-not-a-real-key', authorization: `Bearer ${PROVIDER_KEY}` });
      assert.equal(proxy.status, 401);
      assertOpenAiError(proxy.json, 'invalid_api_key');
      assert.match(proxy.json.error.message, /invalid API key/);
      const rest = await call(api.url, 'POST', '/v1/tools/search', { key: 'not-the-admin-key-at-all', body: { query: 'email' } });
      assert.equal(rest.status, 401);
      assert.equal(rest.body.error.code, 'unauthorized');
      assert.match(rest.body.error.message, /invalid API key/, 'a wrong bearer key is wrong, not missing');
    });

    it('answers 429 in OpenAI format once failed key checks pass the limit', async () => {
      let last: Awaited<ReturnType<typeof postJson>> | undefined;
      for (let attempt = 0; attempt < 8 && last?.status !== 429; attempt++) {
        last = await postJson(`${api.url}/v1/responses`, { model: 'm', input: 'hi' }, { 'x-toolrouter-key': `sk-tr-wrong-${attempt}` });
      }
      assert.equal(last!.status, 429);
      assertOpenAiError(last!.json, 'rate_limit_exceeded');
      assert.ok(Number(last!.headers.get('retry-after')) >= 1);
      assert.equal(llm.received.length, 0);
    });

    it('answers errors raised before any route in the shape of the face the path belongs to', async () => {
      // No key at all on the proxy: missing, in OpenAI's shape; the same on toolrouter's own route: its REST shape.
      const missing = await postJson(`${api.url}/v1/chat/completions`, { model: 'm', messages });
      assert.equal(missing.status, 401);
      assertOpenAiError(missing.json, 'missing_api_key');
      const ownMissing = await call(api.url, 'POST', '/v1/tools/search', { body: { query: 'email' } });
      assert.equal(ownMissing.status, 401);
      assert.deepEqual(Object.keys(ownMissing.body.error).sort(), ['code', 'message']);
      assert.equal(ownMissing.body.error.code, 'unauthorized');

      // Body parsing and JSON depth run before the routes too: OpenAI's shape on a passed-through path, REST's on ours.
      const headers = { 'content-type': 'application/json', 'x-toolrouter-key': ADMIN_KEY };
      const malformed = await fetch(`${api.url}/v1/embeddings`, { method: 'POST', headers, body: '{"input": ' });
      assert.equal(malformed.status, 400);
      assertOpenAiError(await malformed.json(), 'invalid_json');
      const deep = await fetch(`${api.url}/v1/embeddings`, { method: 'POST', headers, body: '['.repeat(200) + ']'.repeat(200) });
      assert.equal(deep.status, 400);
      assertOpenAiError(await deep.json(), 'json_too_deep');
      const ownMalformed = await fetch(`${api.url}/v1/tools/search`, { method: 'POST', headers, body: '{"query": ' });
      assert.equal(ownMalformed.status, 400);
      const ownBody = (await ownMalformed.json()) as { error: Record<string, unknown> };
      assert.deepEqual(Object.keys(ownBody.error).sort(), ['code', 'message']);
      assert.equal(ownBody.error.code, 'invalid_json');
      assert.equal(llm.received.length, 0);
    });
  });

  describe('restricted keys', () => {
    let api: RunningRouter;
    const mail = fixtureTools().filter((tool) => tool.name.startsWith('gmail__'));
    const ops = fixtureTools().filter((tool) => tool.name.startsWith('kubernetes__'));
    let key: string;
    before(async () => {
      // Eight tools: trimmed only with the activation thresholds off.
      api = await startRouter({ upstreamLlmUrl: llm.url, adminKey: ADMIN_KEY, chat: { k: 1 }, search: { activation: { maxTools: 0, maxTokens: 0 } } });
      for (const [source, tools] of [['mail', mail], ['ops', ops]] as const) {
        const put = await call(api.url, 'PUT', `/v1/catalog/sources/${source}`, { key: ADMIN_KEY, body: { tools } });
        assert.equal(put.status, 200, JSON.stringify(put.body));
      }
      await api.indexed();
      ({ key } = await generateKey(api.url, { allowed_servers: ['mail'] }));
    });
    after(async () => {
      await api.close();
    });

    it("counts only the catalog tools the key may see in the rewrite's total", async () => {
      const body = { messages: [{ role: 'user', content: 'scale the deployment' }] };
      const admin = await postJson(`${api.url}/v1/tools/rewrite`, body, { 'x-toolrouter-key': ADMIN_KEY, 'x-toolrouter-catalog': 'true' });
      assert.equal(admin.json.decision.total, mail.length + ops.length);
      const restricted = await postJson(`${api.url}/v1/tools/rewrite`, body, { 'x-toolrouter-key': key, 'x-toolrouter-catalog': 'true' });
      assert.equal(restricted.status, 200, restricted.raw.toString());
      assert.equal(restricted.json.decision.total, mail.length);
      assert.equal(restricted.headers.get('x-toolrouter-tools')?.split('/')[1], String(mail.length));
    });

    it("never hands the model a catalog tool outside the key through the search tool", async () => {
      const all = [...mail, ...ops].map((tool) => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.inputSchema } }));
      const query = { query: 'scale or restart a kubernetes deployment, list pods' };
      for (const [who, secret] of [['admin', ADMIN_KEY], ['restricted', key]] as const) {
        llm.reset();
        llm.respond(scripted(jsonBody(() => toolCallCompletion(`call_${who}`, 'search_tools', query)), jsonBody(() => completion())));
        const answer = await postJson(`${api.url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: `email the team (${who})` }], tools: all }, { 'x-toolrouter-key': secret });
        assert.equal(answer.status, 200, answer.raw.toString());
        const found = JSON.parse(llm.received[1]!.json.messages.at(-1).content).tools.map((tool: any) => tool.name) as string[];
        if (who === 'admin') assert.ok(found.some((name) => name.startsWith('kubernetes__')), found.join(', '));
        else assert.ok(!found.some((name) => name.startsWith('kubernetes__')), found.join(', '));
      }
    });
  });

  describe('with ADMIN_KEY and chat.requireKey off', () => {
    let api: RunningRouter;
    before(async () => {
      api = await startRouter({ upstreamLlmUrl: llm.url, adminKey: ADMIN_KEY, chat: { requireKey: false } });
    });
    after(async () => {
      await api.close();
    });

    it("lets the proxy through on the provider's key alone, while toolrouter's own routes still need a key", async () => {
      const client = new OpenAI({ baseURL: `${api.url}/v1`, apiKey: PROVIDER_KEY, maxRetries: 0 });
      const chat = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS });
      assert.equal(chat.choices[0]!.message.content, 'ok');
      assert.equal(llm.received[0]!.headers.authorization, `Bearer ${PROVIDER_KEY}`);
      assert.equal((await call(api.url, 'GET', '/v1/catalog')).status, 401);
      // Let through without a key, but never as the admin: key management stays closed.
      assert.equal((await postJson(`${api.url}/key/generate`, {})).status, 401);
    });
  });
});
