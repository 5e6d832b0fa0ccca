import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import pino from 'pino';
import type { Tool } from '../../src/catalog/types.js';
import { loadConfig } from '../../src/config/config.js';
import { createEmbedder } from '../../src/embedding/embedder.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { postJson, scripted, startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';
import {
  ANTHROPIC_MODELS,
  anthropicError,
  jsonMessage,
  message,
  messageEvents,
  startStandInAnthropic,
  streamedMessage,
  toolUse,
} from '../helpers/stand-in-anthropic.js';
import { syntheticTools } from '../helpers/synthetic.js';
import { readDocs } from '../helpers/docs.js';

/** The fixture's MCP tools as an Anthropic caller declares them. */
const asAnthropic = (tool: Tool) => ({ name: tool.name, description: tool.description ?? '', input_schema: tool.inputSchema as Anthropic.Tool.InputSchema });
const TOOLS = fixtureTools().map(asAnthropic);
const WEB_SEARCH = { type: 'web_search_20250305' as const, name: 'web_search' as const, max_uses: 3 };
const NEEDED = 'weather__get_forecast';
const ASK = { query: 'weather forecast for a city' };
const PROVIDER_KEY = 'sk-ant-provider-0123456789';
const MODEL = 'claude-sonnet-5-5';
const names = (tools: any[]) => tools.map((tool) => tool.name ?? tool.type);
const emailTo = (name: string) => [{ role: 'user' as const, content: `Email ${name} the quarterly report summary.` }];

/** The official Anthropic client pointed at toolrouter, as ANTHROPIC_BASE_URL does. */
const client = (baseURL: string, headers: Record<string, string> = {}) => new Anthropic({ baseURL, apiKey: PROVIDER_KEY, maxRetries: 0, defaultHeaders: headers });

describe('Anthropic Messages face', () => {
  let upstream: StandInLlm;
  let api: RunningRouter;
  let anthropic: Anthropic;

  before(async () => {
    upstream = await startStandInAnthropic();
    api = await startRouter({ upstreamAnthropicUrl: upstream.url, chat: { k: 3, searchRounds: 2 } });
    anthropic = client(api.url);
  });
  after(async () => {
    await api.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  it('trims the tools to k plus the kept ones, keeps server tools, and forwards the caller\'s Anthropic headers', async () => {
    const reply = await anthropic.messages.create(
      { model: MODEL, max_tokens: 100, messages: emailTo('Bob'), tools: [...TOOLS, WEB_SEARCH] },
      { headers: { 'anthropic-beta': 'token-efficient-tools-2025-02-19' } },
    );
    assert.deepEqual(reply, message());
    const sent = upstream.received[0]!;
    assert.equal(sent.url, '/v1/messages');
    // This SDK sends its key as a bearer token (Claude Code's ANTHROPIC_API_KEY goes as x-api-key: see the replay).
    assert.equal(sent.headers.authorization, `Bearer ${PROVIDER_KEY}`);
    assert.match(String(sent.headers['anthropic-version']), /^\d{4}-\d{2}-\d{2}$/);
    assert.equal(sent.headers['anthropic-beta'], 'token-efficient-tools-2025-02-19');
    const forwarded = names(sent.json.tools);
    assert.equal(forwarded.at(-1), 'search_tools');
    assert.ok(forwarded.includes('web_search'), 'a server tool is always kept');
    assert.ok(forwarded.includes('gmail__send_email'), forwarded.join(', '));
    assert.equal(forwarded.length, 3 + 1 + 1, forwarded.join(', '));
    assert.deepEqual(sent.json.tools.find((tool: any) => tool.name === 'gmail__send_email'), TOOLS.find((tool) => tool.name === 'gmail__send_email'));
  });

  it('not streamed: answers a call of the search tool itself, and the caller gets the call of the found tool', async () => {
    const final = message([toolUse('toolu_weather', NEEDED, { city: 'Lisbon' })]);
    upstream.respond(scripted(jsonMessage(() => message([{ type: 'text', text: 'Let me look for a tool.' }, toolUse('toolu_search', 'search_tools', ASK)])), jsonMessage(() => final)));
    const reply = await anthropic.messages.create({ model: MODEL, max_tokens: 100, messages: emailTo('Carol'), tools: TOOLS });
    assert.deepEqual(reply, final);
    assertSearchRound();
  });

  /** Turn 1 lacked the needed tool; turn 2 has it, after the search call and its tool_result. */
  function assertSearchRound() {
    assert.equal(upstream.received.length, 2);
    const [first, second] = upstream.received.map((request) => request.json);
    assert.ok(!names(first.tools).includes(NEEDED));
    assert.ok(names(second.tools).includes(NEEDED), names(second.tools).join(', '));
    const [call, result] = second.messages.slice(-2);
    assert.equal(call.role, 'assistant');
    assert.deepEqual(call.content.at(-1), toolUse('toolu_search', 'search_tools', ASK));
    assert.equal(result.role, 'user');
    assert.equal(result.content[0].type, 'tool_result');
    assert.equal(result.content[0].tool_use_id, 'toolu_search');
    assert.ok(JSON.parse(result.content[0].content).tools.some((tool: any) => tool.name === NEEDED), result.content[0].content);
  }

  it('streamed: holds the searching turn back and passes the final turn\'s events through as they come', async () => {
    const final = message('Sunny in Lisbon today.');
    upstream.respond(scripted(streamedMessage(() => message([toolUse('toolu_search', 'search_tools', ASK)])), streamedMessage(() => final)));
    const raw = await postJson(`${api.url}/v1/messages`, { model: MODEL, max_tokens: 100, messages: emailTo('Dan'), tools: TOOLS, stream: true }, { 'x-api-key': PROVIDER_KEY, 'anthropic-version': '2023-06-01' });
    assert.equal(raw.status, 200);
    assert.equal(raw.headers.get('content-type'), 'text/event-stream');
    assert.equal(raw.raw.toString(), messageEvents(final).join(''), 'the final turn, byte for byte');
    assertSearchRound();

    // The SDK's stream helper reads the same thing.
    upstream.reset();
    upstream.respond(scripted(streamedMessage(() => message([toolUse('toolu_search', 'search_tools', ASK)])), streamedMessage(() => final)));
    const stream = anthropic.messages.stream({ model: MODEL, max_tokens: 100, messages: emailTo('Erin'), tools: TOOLS });
    const text: string[] = [];
    stream.on('text', (delta) => text.push(delta));
    const { content, stop_reason } = await stream.finalMessage();
    assert.deepEqual({ content, stop_reason }, { content: final.content, stop_reason: final.stop_reason });
    assert.equal(text.join(''), 'Sunny in Lisbon today.');
    assertSearchRound();
  });

  it('keeps selection sticky across three turns, and a new conversation with the same opening starts clean', async () => {
    const turns = ['Email Bob the quarterly report.', 'Now check the weather forecast in Lisbon.', 'Open a GitHub issue about the outage.'];
    const messages: Anthropic.MessageParam[] = [];
    const forwarded: string[][] = [];
    for (const [i, text] of turns.entries()) {
      // As Claude Code does: the cache breakpoint sits on the newest user message only, so it moves every turn.
      for (const earlier of messages) if (Array.isArray(earlier.content)) for (const block of earlier.content) delete (block as { cache_control?: unknown }).cache_control;
      messages.push({ role: 'user', content: [{ type: 'text', text, cache_control: { type: 'ephemeral' } }] });
      upstream.respond(jsonMessage(() => message(`Done with step ${i + 1}.`, `msg_${i}`)));
      const reply = await anthropic.messages.create({ model: MODEL, max_tokens: 100, system: 'You are an office assistant.', messages, tools: TOOLS });
      forwarded.push(names(upstream.received.at(-1)!.json.tools).filter((name) => name !== 'search_tools'));
      messages.push({ role: 'assistant', content: reply.content });
    }
    for (let turn = 1; turn < forwarded.length; turn++) {
      assert.deepEqual(forwarded[turn]!.slice(0, forwarded[turn - 1]!.length), forwarded[turn - 1], `turn ${turn + 1}: ${forwarded[turn]!.join(', ')}`);
      assert.ok(forwarded[turn]!.length > forwarded[turn - 1]!.length);
    }
    const again = await postJson(`${api.url}/v1/tools/rewrite`, { system: 'You are an office assistant.', messages: [{ role: 'user', content: turns[0] }], tools: TOOLS });
    assert.equal(again.status, 200, again.raw.toString());
    assert.equal(again.json.decision.api, 'anthropic');
    assert.ok(!again.json.decision.kept.some((tool: any) => tool.reason === 'sticky'));
  });

  it('count_tokens: rewritten the same way and passed through', async () => {
    const counted = await anthropic.messages.countTokens({ model: MODEL, messages: emailTo('Frank'), tools: TOOLS });
    const sent = upstream.received[0]!;
    assert.equal(sent.url, '/v1/messages/count_tokens');
    assert.equal(counted.input_tokens, Math.ceil(sent.raw.length / 4), 'the upstream\'s count reaches the caller');
    assert.equal(sent.json.tools.length, 3 + 1);
    assert.equal(names(sent.json.tools).at(-1), 'search_tools');
  });

  it('answers errors in Anthropic\'s shape, and passes the upstream\'s own errors through', async () => {
    await assert.rejects(anthropic.messages.create({ model: MODEL, max_tokens: 10, messages: 'nope' as never, tools: TOOLS }), (error: unknown) => {
      assert.ok(error instanceof Anthropic.BadRequestError, String(error));
      assert.deepEqual(Object.keys(error.error as object), ['type', 'error']);
      assert.equal((error.error as any).error.type, 'invalid_request_error');
      assert.match((error.error as any).error.message, /messages/);
      return true;
    });
    const malformed = await postJson(`${api.url}/v1/messages`, '{"model": ', { 'anthropic-version': '2023-06-01' });
    assert.equal(malformed.status, 400);
    assert.equal(malformed.json.type, 'error');
    assert.equal(malformed.json.error.type, 'invalid_request_error');

    upstream.respond(anthropicError(429, 'rate_limit_error', 'Slow down.'));
    await assert.rejects(anthropic.messages.create({ model: MODEL, max_tokens: 10, messages: emailTo('Gina'), tools: TOOLS }), (error: unknown) => {
      assert.ok(error instanceof Anthropic.RateLimitError);
      assert.deepEqual(error.error, { type: 'error', error: { type: 'rate_limit_error', message: 'Slow down.' } });
      return true;
    });
  });

  it('passes other Anthropic routes through, apart from OpenAI\'s of the same name', async () => {
    const models = await anthropic.models.list();
    assert.deepEqual(models.data.map((model) => model.id), ['claude-standin']);
    assert.equal(upstream.received[0]!.url.split('?')[0], '/v1/models');
    assert.equal(upstream.received[0]!.headers.authorization, `Bearer ${PROVIDER_KEY}`);
    // No OpenAI upstream is configured: without Anthropic's header the same path is not Anthropic's.
    const openAiStyle = await fetch(`${api.url}/v1/models`);
    assert.equal(openAiStyle.status, 404);
    assert.equal(upstream.received.length, 1);
    assert.deepEqual(ANTHROPIC_MODELS.data.length, 1);
  });

});

describe('Claude Code through the README\'s line', () => {
  let upstream: StandInLlm;
  let api: RunningRouter;
  let key: string;
  /** The docs' Claude Code line (docs/chat-proxies.md): its base URL and its custom header, as Claude Code reads them. */
  const line = /^ANTHROPIC_BASE_URL=(\S+) ANTHROPIC_CUSTOM_HEADERS='([^:']+): [^']*' claude$/m.exec(readDocs());

  before(async () => {
    upstream = await startStandInAnthropic();
    api = await startRouter({ upstreamAnthropicUrl: upstream.url, adminKey: ADMIN_KEY, chat: { k: 3 } });
    ({ key } = await generateKey(api.url, {}));
  });
  after(async () => {
    await api.close();
    await upstream.close();
  });

  it('replays Claude Code\'s request shape: 300 tools, tool_choice auto, system blocks with cache_control, streamed', async () => {
    const many = [...syntheticTools(297).map(asAnthropic), ...TOOLS.slice(0, 3)];
    const system = [
      { type: 'text', text: "You are Claude Code, Anthropic's official CLI for Claude.", cache_control: { type: 'ephemeral' } },
      { type: 'text', text: 'You are an interactive CLI tool that helps users with software engineering tasks.', cache_control: { type: 'ephemeral' } },
    ];
    const body = {
      model: 'claude-sonnet-4-5-20250929',
      max_tokens: 32_000,
      system,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'create an invoice in the billing system for ACME', cache_control: { type: 'ephemeral' } }] }],
      tools: many,
      tool_choice: { type: 'auto' },
      metadata: { user_id: 'user_abc_account_def_session_ghi' },
      stream: true,
    };
    assert.ok(line, 'the docs have the Claude Code line');
    const [, baseUrl, headerName] = line;
    assert.equal(baseUrl, 'http://127.0.0.1:8080', 'the default address');
    assert.equal(headerName, 'x-toolrouter-key');
    // Claude Code calls <ANTHROPIC_BASE_URL>/v1/messages; here the router listens on an ephemeral port.
    const answer = await postJson(`${baseUrl!.replace('http://127.0.0.1:8080', api.url)}/v1/messages?beta=true`, body, {
      [headerName!]: key,
      'x-api-key': PROVIDER_KEY,
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14',
      'x-app': 'cli',
      'user-agent': 'claude-cli/2.0.0 (external, cli)',
    });
    assert.equal(answer.status, 200, answer.raw.toString());
    assert.equal(answer.raw.toString(), messageEvents(message()).join(''));
    const sent = upstream.received[0]!;
    assert.equal(sent.url, '/v1/messages?beta=true');
    assert.equal(sent.json.tools.length, 3 + 1, 'k plus the search tool');
    assert.ok(names(sent.json.tools).some((name) => name.includes('create_invoice')), names(sent.json.tools).join(', '));
    assert.deepEqual(sent.json.system, system, 'the system blocks and their cache_control go as they came');
    assert.deepEqual(sent.json.tool_choice, { type: 'auto' });
    assert.deepEqual(sent.json.messages, body.messages);
    assert.equal(sent.headers['anthropic-beta'], 'claude-code-20250219,interleaved-thinking-2025-05-14');
    assert.equal(sent.headers['x-api-key'], PROVIDER_KEY);
    assert.equal(sent.headers['x-toolrouter-key'], undefined);
    assert.equal(answer.headers.get('x-toolrouter-tools'), '3/300');

    // Without the header the router (with ADMIN_KEY) refuses, in Anthropic's shape.
    const refused = await postJson(`${api.url}/v1/messages`, body, { 'x-api-key': PROVIDER_KEY, 'anthropic-version': '2023-06-01' });
    assert.equal(refused.status, 401);
    assert.equal(refused.json.error.type, 'authentication_error');
  });
});

describe('Anthropic native mode: defer_loading and tool_reference', () => {
  let upstream: StandInLlm;
  let api: RunningRouter;

  before(async () => {
    upstream = await startStandInAnthropic();
    api = await startRouter({ upstreamAnthropicUrl: upstream.url, chat: { k: 3, native: 'auto' } });
  });
  after(async () => {
    await api.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  it('forwards every tool, the ones not kept deferred, and answers the search call with tool_reference blocks', async () => {
    const final = message([toolUse('toolu_weather', NEEDED, { city: 'Lisbon' })]);
    upstream.respond(scripted(jsonMessage(() => message([toolUse('toolu_search', 'search_tools', ASK)])), jsonMessage(() => final)));
    const reply = await client(api.url).messages.create({ model: MODEL, max_tokens: 100, messages: emailTo('Hal'), tools: [...TOOLS, WEB_SEARCH] });
    assert.deepEqual(reply, final);
    const [first, second] = upstream.received.map((request) => request.json);
    assert.equal(first.tools.length, TOOLS.length + 2, 'every tool, the server tool and the search tool');
    const loaded = first.tools.filter((tool: any) => tool.defer_loading !== true);
    assert.deepEqual(names(loaded).slice(-1), ['search_tools']);
    assert.ok(names(loaded).includes('web_search'));
    assert.equal(loaded.length, 3 + 2, names(loaded).join(', '));
    const deferred = first.tools.filter((tool: any) => tool.defer_loading === true);
    assert.ok(names(deferred).includes(NEEDED));
    for (const tool of deferred) {
      const { defer_loading: _deferred, ...original } = tool;
      assert.deepEqual(original, TOOLS.find((candidate) => candidate.name === tool.name));
    }
    // The second call carries the same tools block (nothing added, so the cached prefix holds) and the references.
    assert.deepEqual(second.tools, first.tools);
    const result = second.messages.at(-1).content[0];
    assert.equal(result.type, 'tool_result');
    assert.equal(result.tool_use_id, 'toolu_search');
    assert.ok(result.content.every((block: any) => block.type === 'tool_reference'), JSON.stringify(result.content));
    assert.ok(result.content.some((block: any) => block.tool_name === NEEDED), JSON.stringify(result.content));
  });

  it('streamed: the searching turn is held back, the references sent, the final turn streamed through', async () => {
    const final = message('Sunny in Lisbon.');
    upstream.respond(scripted(streamedMessage(() => message([toolUse('toolu_search', 'search_tools', ASK)])), streamedMessage(() => final)));
    const answer = await postJson(`${api.url}/v1/messages`, { model: MODEL, max_tokens: 100, messages: emailTo('Uma'), tools: TOOLS, stream: true }, { 'anthropic-version': '2023-06-01' });
    assert.equal(answer.raw.toString(), messageEvents(final).join(''));
    assert.equal(answer.headers.get('x-toolrouter-native'), 'on');
    const second = upstream.received[1]!.json;
    assert.deepEqual(second.messages.at(-2), { role: 'assistant', content: [toolUse('toolu_search', 'search_tools', ASK)] });
    assert.ok(second.messages.at(-1).content[0].content.some((block: any) => block.type === 'tool_reference' && block.tool_name === NEEDED));
  });

  it('with 300 tools forwards all of them, every one deferred but the kept ones', async () => {
    const many = syntheticTools(300).map(asAnthropic);
    await client(api.url).messages.create({ model: 'claude-opus-4-6', max_tokens: 10, messages: [{ role: 'user', content: 'create an invoice in the billing system' }], tools: many });
    const sent = upstream.received[0]!.json.tools as any[];
    assert.equal(sent.length, 300 + 1);
    const loaded = sent.filter((tool) => tool.defer_loading !== true);
    assert.equal(loaded.length, 3 + 1, names(loaded).join(', '));
    assert.ok(names(loaded).some((name) => name.includes('create_invoice')), names(loaded).join(', '));
  });

  it('auto trims models outside chat.nativeModels (Haiku), and the header overrides the setting', async () => {
    await client(api.url).messages.create({ model: 'claude-haiku-4-5', max_tokens: 10, messages: emailTo('Ivy'), tools: TOOLS });
    assert.equal(upstream.received[0]!.json.tools.length, 3 + 1);
    assert.ok(upstream.received[0]!.json.tools.every((tool: any) => tool.defer_loading === undefined));
    await client(api.url, { 'x-toolrouter-native': 'off' }).messages.create({ model: MODEL, max_tokens: 10, messages: emailTo('Jo'), tools: TOOLS });
    assert.equal(upstream.received[1]!.json.tools.length, 3 + 1);
    await client(api.url, { 'x-toolrouter-native': 'on' }).messages.create({ model: 'claude-haiku-4-5', max_tokens: 10, messages: emailTo('Kim'), tools: TOOLS });
    assert.equal(upstream.received[2]!.json.tools.length, TOOLS.length + 1);
    const bad = await postJson(`${api.url}/v1/messages`, { model: MODEL, max_tokens: 10, messages: emailTo('Lee'), tools: TOOLS }, { 'x-toolrouter-native': 'maybe' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.type, 'invalid_request_error');
  });
});

describe('Anthropic face with keys', () => {
  let upstream: StandInLlm;
  let api: RunningRouter;
  const mail = fixtureTools().filter((tool) => tool.name.startsWith('gmail__'));
  const ops = fixtureTools().filter((tool) => tool.name.startsWith('kubernetes__'));
  let key: string;

  before(async () => {
    upstream = await startStandInAnthropic();
    api = await startRouter({ upstreamAnthropicUrl: upstream.url, adminKey: ADMIN_KEY, chat: { k: 1 }, search: { activation: { maxTools: 0, maxTokens: 0 } } });
    for (const [source, tools] of [['mail', mail], ['ops', ops]] as const) {
      const put = await call(api.url, 'PUT', `/v1/catalog/sources/${source}`, { key: ADMIN_KEY, body: { tools } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    }
    await api.indexed();
    ({ key } = await generateKey(api.url, { allowed_servers: ['mail'] }));
  });
  after(async () => {
    await api.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  it('refuses a request without a toolrouter key in Anthropic\'s shape, and takes one in x-toolrouter-key', async () => {
    await assert.rejects(client(api.url).messages.create({ model: MODEL, max_tokens: 10, messages: emailTo('Max') }), (error: unknown) => {
      assert.ok(error instanceof Anthropic.AuthenticationError, String(error));
      assert.equal((error.error as any).type, 'error');
      assert.equal((error.error as any).error.type, 'authentication_error');
      assert.match((error.error as any).error.message, /x-toolrouter-key/);
      return true;
    });
    assert.equal(upstream.received.length, 0);
    const reply = await client(api.url, { 'x-toolrouter-key': key }).messages.create({ model: MODEL, max_tokens: 10, messages: emailTo('Ned') });
    assert.deepEqual(reply, message());
    assert.equal(upstream.received[0]!.headers.authorization, `Bearer ${PROVIDER_KEY}`);
    assert.equal(upstream.received[0]!.headers['x-toolrouter-key'], undefined);
  });

  it('never references a catalog tool outside the key in native mode', async () => {
    const all = [...mail, ...ops].map(asAnthropic);
    const query = { query: 'scale or restart a kubernetes deployment, list pods' };
    for (const [who, secret] of [['admin', ADMIN_KEY], ['restricted', key]] as const) {
      upstream.reset();
      upstream.respond(scripted(jsonMessage(() => message([toolUse(`toolu_${who}`, 'search_tools', query)])), jsonMessage(() => message())));
      const headers = { 'x-toolrouter-key': secret, 'x-toolrouter-native': 'on' };
      await client(api.url, headers).messages.create({ model: MODEL, max_tokens: 10, messages: emailTo(`the team (${who})`), tools: all });
      const content = upstream.received[1]!.json.messages.at(-1).content[0].content;
      const found = (Array.isArray(content) ? content.map((block: any) => block.tool_name) : JSON.parse(content).tools.map((tool: any) => tool.name)) as string[];
      if (who === 'admin') assert.ok(found.some((name) => name.startsWith('kubernetes__')), found.join(', '));
      else assert.ok(!found.some((name) => name.startsWith('kubernetes__')), found.join(', '));
    }
  });
});

describe('Anthropic face: fail-open and no upstream', () => {
  let upstream: StandInLlm;
  let router: Toolrouter;
  let server: Server;
  let url: string;

  before(async () => {
    upstream = await startStandInAnthropic();
    const config = loadConfig({}, { port: 0, host: '127.0.0.1', logLevel: 'silent', upstreamAnthropicUrl: upstream.url });
    const real = await createEmbedder(config.embedding);
    // The embeddings provider, down: every embedding fails.
    const embedder = { modelId: real.modelId, cacheKey: real.cacheKey, dimensions: real.dimensions, embed: () => Promise.reject(new Error('embeddings provider unreachable')) };
    router = await createToolrouter(config, { log: pino({ level: 'silent' }), embedder });
    server = await listen(router);
    const address = server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  after(async () => {
    await new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
    await router.close();
    await upstream.close();
  });

  it('forwards the tools unranked when ranking fails, and says so', async () => {
    const { data, response } = await client(url).messages.create({ model: MODEL, max_tokens: 10, messages: emailTo('Olga'), tools: TOOLS }).withResponse();
    assert.deepEqual(data, message());
    assert.equal(response.headers.get('x-toolrouter-fail-open'), 'search_failed');
    assert.deepEqual(upstream.received[0]!.json.tools, TOOLS);
  });

  it('answers 502 in Anthropic\'s shape when the upstream cannot be reached, and 503 when none is configured', async () => {
    const dead = await startStandInLlm();
    const deadUrl = dead.url.replace(/\/v1$/, '');
    await dead.close();
    const unreachable = await startRouter({ upstreamAnthropicUrl: deadUrl });
    const none = await startRouter({});
    try {
      await assert.rejects(client(unreachable.url).messages.create({ model: MODEL, max_tokens: 10, messages: emailTo('Pat') }), (error: unknown) => {
        assert.ok(error instanceof Anthropic.APIError && error.status === 502, String(error));
        assert.equal((error.error as any).error.type, 'api_error');
        return true;
      });
      const missing = await postJson(`${none.url}/v1/messages`, { model: MODEL, max_tokens: 10, messages: emailTo('Quinn') });
      assert.equal(missing.status, 503);
      assert.equal(missing.json.type, 'error');
      assert.match(missing.json.error.message, /UPSTREAM_ANTHROPIC_URL/);
    } finally {
      await unreachable.close();
      await none.close();
    }
  });
});
