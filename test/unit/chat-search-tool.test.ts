import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import pino from 'pino';
import type { Tool } from '../../src/catalog/types.js';
import { loadConfig } from '../../src/config/config.js';
import { createEmbedder, type Embedder } from '../../src/embedding/embedder.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import {
  completion,
  functionCallEvents,
  functionCallResponse,
  jsonBody,
  postJson as post,
  responseObject,
  responsesEventStream,
  scripted,
  sse,
  startStandInLlm,
  textChunks,
  toolCallChunks,
  toolCallCompletion,
  type StandInLlm,
} from '../helpers/stand-in-llm.js';
import { syntheticTools } from '../helpers/synthetic.js';
import { counter } from '../helpers/metrics.js';

const asFunction = (tool: Tool) => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.inputSchema } });
const asResponsesFunction = (tool: Tool) => ({ type: 'function', name: tool.name, description: tool.description, parameters: tool.inputSchema });
const TOOLS = fixtureTools().map(asFunction);
const RESPONSES_TOOLS = fixtureTools().map(asResponsesFunction);
const NEEDED = 'weather__get_forecast';
const ASK = { query: 'weather forecast for a city' };
const user = (content: string) => ({ role: 'user', content });
/**
 * A conversation about email: with k=1 the weather tool it will need is not forwarded. Each test has its own (sticky
 * selection remembers a conversation's tools).
 */
const emailTo = (name: string) => [user(`Email ${name} the quarterly report summary.`)];
const EMAIL = emailTo('Bob');

const chatNames = (tools: any[]) => tools.map((tool) => tool.function?.name ?? tool.name ?? tool.type);


describe('search tool: a trimmed request still reaches the tool it needs', () => {
  let llm: StandInLlm;
  let api: RunningRouter;
  let completions: string;
  let responses: string;

  before(async () => {
    llm = await startStandInLlm();
    api = await startRouter({ upstreamLlmUrl: llm.url, chat: { k: 1, searchRounds: 2 } });
    completions = `${api.url}/v1/chat/completions`;
    responses = `${api.url}/v1/responses`;
  });
  after(async () => {
    await api.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  /** Turn 1 had the search tool and not the needed tool; turn 2 got it, after the search call and its answer. */
  function assertSearchRound(api: 'chat' | 'responses') {
    assert.equal(llm.received.length, 2);
    const [first, second] = llm.received.map((request) => request.json);
    assert.ok(!chatNames(first.tools).includes(NEEDED), chatNames(first.tools).join(', '));
    assert.equal(chatNames(first.tools).at(-1), 'search_tools');
    assert.ok(chatNames(second.tools).includes(NEEDED), chatNames(second.tools).join(', '));
    // What the model saw before stays first, in the same order: the found tools are appended.
    assert.deepEqual(chatNames(second.tools).slice(0, first.tools.length - 1), chatNames(first.tools).slice(0, -1));
    if (api === 'chat') {
      const [call, result] = second.messages.slice(-2);
      assert.equal(call.role, 'assistant');
      assert.equal(call.tool_calls[0].function.name, 'search_tools');
      assert.deepEqual(JSON.parse(call.tool_calls[0].function.arguments), ASK);
      assert.equal(result.role, 'tool');
      assert.equal(result.tool_call_id, 'call_search');
      assert.ok(JSON.parse(result.content).tools.some((tool: any) => tool.name === NEEDED), result.content);
    } else {
      const [call, result] = second.input.slice(-2);
      assert.deepEqual(call, { type: 'function_call', call_id: 'call_search', name: 'search_tools', arguments: JSON.stringify(ASK) });
      assert.equal(result.type, 'function_call_output');
      assert.equal(result.call_id, 'call_search');
      assert.ok(JSON.parse(result.output).tools.some((tool: any) => tool.name === NEEDED), result.output);
    }
  }

  it('chat, not streamed: answers the search call itself and the caller gets the call of the found tool', async () => {
    const before = await counter(api, 'toolrouter_chat_search_calls_total', { api: 'chat', result: 'found' });
    const final = toolCallCompletion('call_weather', NEEDED, { city: 'Lisbon' });
    llm.respond(scripted(jsonBody(() => toolCallCompletion('call_search', 'search_tools', ASK)), jsonBody(() => final)));
    const answer = await post(completions, { model: 'm', messages: EMAIL, tools: TOOLS });
    assert.equal(answer.status, 200, answer.raw.toString());
    assert.deepEqual(answer.json, final);
    assert.equal(answer.headers.get('x-toolrouter-search-calls'), '1');
    assertSearchRound('chat');
    assert.equal(await counter(api, 'toolrouter_chat_search_calls_total', { api: 'chat', result: 'found' }), before + 1);
  });

  it('abstains when no tool fits (calibrated score below search.minScore): only the search tool goes up, and a search finds the tool', async () => {
    // Words no tool's text has: the calibrated top score is below the default min_score.
    const nothing = [user('Zorblat quixnid the frumious vellichor.')];
    const decision = await post(`${api.url}/v1/tools/rewrite`, { model: 'm', messages: nothing, tools: TOOLS });
    assert.equal(decision.status, 200);
    assert.deepEqual(chatNames(decision.json.request.tools), ['search_tools'], 'no ranked tool is kept');
    assert.equal(decision.json.decision.dropped.length, TOOLS.length);
    // The same request with a query some tool answers keeps its k ranked tools.
    const answered = await post(`${api.url}/v1/tools/rewrite`, { model: 'm', messages: emailTo('Dora'), tools: TOOLS });
    assert.equal(answered.json.decision.kept.filter((tool: any) => tool.reason === 'ranked').length, 1);

    const final = toolCallCompletion('call_weather', NEEDED, { city: 'Lisbon' });
    llm.respond(scripted(jsonBody(() => toolCallCompletion('call_search', 'search_tools', ASK)), jsonBody(() => final)));
    const answer = await post(completions, { model: 'm', messages: nothing, tools: TOOLS });
    assert.equal(answer.status, 200, answer.raw.toString());
    assert.deepEqual(answer.json, final);
    assert.deepEqual(chatNames(llm.received[0]!.json.tools), ['search_tools']);
    assert.ok(chatNames(llm.received[1]!.json.tools).includes(NEEDED));
  });

  it('chat, streamed: holds the turn that calls the search tool and streams the final one byte for byte', async () => {
    const final = textChunks('The forecast for Lisbon is sunny.');
    llm.respond(scripted(sse(() => toolCallChunks('call_search', 'search_tools', ASK)), sse(() => final)));
    const answer = await post(completions, { model: 'm', messages: emailTo('Erin'), tools: TOOLS, stream: true });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('content-type'), 'text/event-stream');
    assert.equal(answer.raw.toString(), final.join(''));
    assertSearchRound('chat');
  });

  it('Responses API, not streamed and streamed', async () => {
    llm.respond(scripted(jsonBody(() => functionCallResponse('call_search', 'search_tools', ASK)), jsonBody(() => responseObject('Sunny.'))));
    const plain = await post(responses, { model: 'm', input: emailTo('Frank')[0]!.content, tools: RESPONSES_TOOLS });
    assert.equal(plain.status, 200, plain.raw.toString());
    assert.deepEqual(plain.json, responseObject('Sunny.'));
    assertSearchRound('responses');

    llm.reset();
    llm.respond(scripted(sse(() => functionCallEvents('call_search', 'search_tools', ASK)), sse(() => [responsesEventStream('Sunny in Lisbon')])));
    const streamed = await post(responses, { model: 'm', input: emailTo('Grace')[0]!.content, tools: RESPONSES_TOOLS, stream: true });
    assert.equal(streamed.status, 200);
    assert.equal(streamed.raw.toString(), responsesEventStream('Sunny in Lisbon'));
    assertSearchRound('responses');
  });

  it('passes a turn that does not call the search tool straight through', async () => {
    const answer = await post(completions, { model: 'm', messages: [user('Email Alice the minutes.')], tools: TOOLS });
    assert.deepEqual(answer.json, completion());
    assert.equal(llm.received.length, 1);
    assert.equal(answer.headers.get('x-toolrouter-search-calls'), '0');
  });

  it('is bounded: after searchRounds answered searches the model turn goes to the caller as it is', async () => {
    llm.respond(jsonBody(() => toolCallCompletion('call_again', 'search_tools', { query: 'something else' })));
    const answer = await post(completions, { model: 'm', messages: [user('Email Carol the agenda.')], tools: TOOLS });
    assert.equal(answer.status, 200);
    assert.equal(llm.received.length, 3, 'two rounds answered, the third turn forwarded');
    assert.equal(answer.json.choices[0].message.tool_calls[0].function.name, 'search_tools');
    const lastAnswer = JSON.parse(llm.received[2]!.json.messages.at(-1).content);
    assert.match(lastAnswer.note, /last tool search/);
  });

  it('abstains like REST when nothing fits: no tools added in any round, and the answer says what was searched (issue 42)', async () => {
    // Words no tool's text has (the rewrite abstains on them, test above): the search tool, asked round after round,
    // adds nothing, where before it handed the model its top 5 every round.
    const nothing = 'Zorblat quixnid the frumious vellichor';
    llm.respond(jsonBody(() => toolCallCompletion('call_nothing', 'search_tools', { query: nothing })));
    const answer = await post(completions, { model: 'm', messages: [user('Email Erin the minutes.')], tools: TOOLS });
    assert.equal(answer.status, 200);
    assert.equal(llm.received.length, 3, 'two rounds answered, the third turn forwarded');
    const offered = llm.received.map((request) => chatNames(request.json.tools));
    assert.deepEqual(offered[1], offered[0], 'no tool added after the first search');
    assert.deepEqual(offered[2], offered[0], 'no tool added after the second search');
    for (const received of llm.received.slice(1)) {
      const result = JSON.parse(received.json.messages.at(-1).content);
      assert.deepEqual(result.tools, []);
      assert.match(result.note, /No tool fits "Zorblat quixnid the frumious vellichor"\. Searches \d+ tools of \d+ servers/);
    }
    // A query a tool answers still finds it: the abstention is the score's, not the search tool's.
    llm.reset();
    llm.respond(scripted(jsonBody(() => toolCallCompletion('call_search', 'search_tools', ASK)), jsonBody(() => completion('done'))));
    await post(completions, { model: 'm', messages: emailTo('Fay'), tools: TOOLS });
    assert.ok(chatNames(llm.received[1]!.json.tools).includes(NEEDED));
  });

  it('answers a malformed search call with how to call it, and continues', async () => {
    llm.respond(scripted(jsonBody(() => toolCallCompletion('call_bad', 'search_tools', { q: 1 })), jsonBody(() => completion('done'))));
    const answer = await post(completions, { model: 'm', messages: [user('Email Dan the invoice.')], tools: TOOLS });
    assert.deepEqual(answer.json, completion('done'));
    assert.match(JSON.parse(llm.received[1]!.json.messages.at(-1).content).error, /"query"/);
  });

  it("picks another name when the caller's tools already have one called search_tools", async () => {
    const own = { type: 'function', function: { name: 'search_tools', description: 'Search the product catalogue', parameters: { type: 'object' } } };
    const answer = await post(`${api.url}/v1/tools/rewrite`, { messages: EMAIL, tools: [own, ...TOOLS] });
    assert.equal(answer.json.decision.searchTool, 'search_tools_2');
    assert.equal(chatNames(answer.json.request.tools).at(-1), 'search_tools_2');
  });
});

describe('sticky selection', () => {
  let llm: StandInLlm;
  let api: RunningRouter;

  before(async () => {
    llm = await startStandInLlm();
    api = await startRouter({ upstreamLlmUrl: llm.url, chat: { k: 3 } });
  });
  after(async () => {
    await api.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it("turn N+1 forwards turn N's tools first, in the same order, over three turns", async () => {
    const turns = ['Email Bob the quarterly report.', 'Now check the weather forecast in Lisbon.', 'Open a GitHub issue about the outage.'];
    const messages: unknown[] = [{ role: 'system', content: 'You are an office assistant.' }];
    const forwarded: string[][] = [];
    for (const text of turns) {
      messages.push(user(text));
      const answer = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages, tools: TOOLS });
      assert.equal(answer.status, 200);
      forwarded.push(chatNames(llm.received.at(-1)!.json.tools).filter((name) => name !== 'search_tools'));
      // The caller carries the answer it got: that is what makes the next request this conversation's next turn.
      messages.push(answer.json.choices[0].message);
    }
    for (let turn = 1; turn < forwarded.length; turn++) {
      assert.deepEqual(forwarded[turn]!.slice(0, forwarded[turn - 1]!.length), forwarded[turn - 1], `turn ${turn + 1}: ${forwarded[turn]!.join(', ')}`);
      assert.ok(forwarded[turn]!.length > forwarded[turn - 1]!.length, 'new picks are appended');
    }
    assert.ok(forwarded[1]!.includes('weather__get_forecast') && forwarded[2]!.includes('github__create_issue'), forwarded.at(-1)!.join(', '));

    // Another conversation starts from nothing.
    await post(`${api.url}/v1/chat/completions`, { model: 'm', messages: [user(turns[1]!)], tools: TOOLS });
    assert.ok(!chatNames(llm.received.at(-1)!.json.tools).includes('gmail__send_email'));
  });

  const MANY = syntheticTools(120).map(asFunction);
  const reasons = (decision: any) => decision.kept.map((tool: any) => tool.reason);

  it('chat: conversations that open with the same words stay apart; a true continuation stays sticky (issue 28)', async () => {
    const counts: string[] = [];
    for (let i = 0; i < 4; i++) {
      const answer = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages: [user('hi')], tools: MANY });
      assert.equal(answer.status, 200);
      counts.push(answer.headers.get('x-toolrouter-tools')!);
    }
    assert.deepEqual(new Set(counts).size, 1, `each new conversation forwards the same: ${counts.join(' ')}`);
    assert.ok(Number(counts[0]!.split('/')[0]) < MANY.length, `trimmed: ${counts[0]}`);
    const dry = await post(`${api.url}/v1/tools/rewrite`, { messages: [user('hi')], tools: MANY });
    assert.ok(!reasons(dry.json.decision).includes('sticky'), reasons(dry.json.decision).join(', '));

    // The same opening answered differently, or an answer the upstream never gave, is not a continuation.
    const forged = [user('hi'), { role: 'assistant', content: 'Something the model never said.' }, user('create an invoice in the billing system')];
    const notOurs = await post(`${api.url}/v1/tools/rewrite`, { messages: forged, tools: MANY });
    assert.ok(!reasons(notOurs.json.decision).includes('sticky'), reasons(notOurs.json.decision).join(', '));

    // Streamed: the answer is read from the SSE as it passes.
    llm.respond(sse(() => textChunks('Hello, how can I help?')));
    const first = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages: [user('hi')], tools: MANY, stream: true });
    assert.equal(first.status, 200);
    const turn1 = chatNames(llm.received.at(-1)!.json.tools).filter((name) => name !== 'search_tools');
    const continued = [user('hi'), { role: 'assistant', content: 'Hello, how can I help?' }, user('create an invoice in the billing system')];
    const next = await post(`${api.url}/v1/tools/rewrite`, { messages: continued, tools: MANY });
    const sticky = next.json.decision.kept.filter((tool: any) => tool.reason === 'sticky').map((tool: any) => tool.name);
    assert.deepEqual(sticky, turn1, 'the continuation keeps what its first turn was forwarded, first and in order');
  });

  it('Responses: the same opening stays apart; a continuation by its items or previous_response_id stays sticky (issue 28)', async () => {
    const asResponses = MANY.map((tool) => ({ type: 'function', ...tool.function }));
    const counts: string[] = [];
    for (let i = 0; i < 3; i++) {
      const answer = await post(`${api.url}/v1/responses`, { model: 'm', input: 'hi', tools: asResponses });
      assert.equal(answer.status, 200);
      counts.push(answer.headers.get('x-toolrouter-tools')!);
    }
    assert.equal(new Set(counts).size, 1, counts.join(' '));
    const dry = await post(`${api.url}/v1/tools/rewrite`, { model: 'm', input: 'hi', tools: asResponses });
    assert.ok(!reasons(dry.json.decision).includes('sticky'));

    llm.reset();
    llm.respond(jsonBody(() => ({ ...responseObject('Hello from the model.'), id: 'resp_hi' })));
    const input = [{ role: 'user', content: 'hi' }];
    const first = await post(`${api.url}/v1/responses`, { model: 'm', input, tools: asResponses });
    const turn1 = chatNames(llm.received[0]!.json.tools).filter((name) => name !== 'search_tools');
    const items = [...input, ...first.json.output, { role: 'user', content: 'create an invoice in the billing system' }];
    const byItems = await post(`${api.url}/v1/tools/rewrite`, { model: 'm', input: items, tools: asResponses });
    const stickyOf = (answer: any) => answer.json.decision.kept.filter((tool: any) => tool.reason === 'sticky').map((tool: any) => tool.name);
    assert.deepEqual(stickyOf(byItems), turn1);
    const byId = await post(`${api.url}/v1/tools/rewrite`, { model: 'm', previous_response_id: 'resp_hi', input: 'create an invoice', tools: asResponses });
    assert.deepEqual(stickyOf(byId), turn1);

    // Without the search tool (tool_choice none), streamed: the id is read from the events as they pass.
    llm.reset();
    llm.respond(sse(() => [responsesEventStream('Plain answer').replaceAll('resp_standin', 'resp_streamed')]));
    const streamed = await post(`${api.url}/v1/responses`, { model: 'm', input: 'list the invoices', tools: asResponses, tool_choice: 'none', stream: true });
    assert.equal(streamed.status, 200);
    const sent = chatNames(llm.received[0]!.json.tools);
    assert.ok(!sent.includes('search_tools') && sent.length < asResponses.length, sent.join(', '));
    const next = await post(`${api.url}/v1/tools/rewrite`, { model: 'm', previous_response_id: 'resp_streamed', input: 'and the customers', tools: asResponses });
    assert.deepEqual(stickyOf(next), sent);
  });

  it('follows a Responses conversation through previous_response_id', async () => {
    llm.respond(jsonBody(() => ({ ...responseObject(), id: 'resp_turn1' })));
    const first = await post(`${api.url}/v1/responses`, { model: 'm', input: 'Email Bob the quarterly report.', tools: RESPONSES_TOOLS });
    assert.equal(first.status, 200);
    const turn1 = chatNames(llm.received[0]!.json.tools).filter((name) => name !== 'search_tools');
    await post(`${api.url}/v1/responses`, { model: 'm', previous_response_id: 'resp_turn1', input: 'Now the weather forecast in Lisbon.', tools: RESPONSES_TOOLS });
    const turn2 = chatNames(llm.received[1]!.json.tools).filter((name) => name !== 'search_tools');
    assert.deepEqual(turn2.slice(0, turn1.length), turn1);
    assert.ok(turn2.includes('weather__get_forecast'), turn2.join(', '));
  });
});

describe('sticky selection when the kept and new tools cover every tool (issue 56)', () => {
  let llm: StandInLlm;
  let api: RunningRouter;
  // Six tools, k = 3: once three were forwarded, the other three fit in k and nothing is dropped ("within_k").
  const SIX = ['fs__read_file', 'github__create_issue', 'weather__get_current_conditions', 'slack__post_message', 'weather__get_forecast', 'gmail__send_email'];
  const tools = SIX.map((name) => TOOLS.find((tool) => tool.function.name === name)!);

  before(async () => {
    llm = await startStandInLlm();
    // Search is active for any list (activation thresholds 0), so the first turn is trimmed to k.
    api = await startRouter({ upstreamLlmUrl: llm.url, chat: { k: 3, searchRounds: 0 }, search: { activation: { maxTools: 0, maxTokens: 0 } } });
  });
  after(async () => {
    await api.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it("keeps the earlier turns' tools first, in their order, over three turns", async () => {
    const messages: unknown[] = [];
    const forwarded: string[][] = [];
    for (const text of ['Email Bob the weather forecast for Lisbon.', 'Also post it to the team channel.', 'Thanks, that is all.']) {
      messages.push(user(text));
      const answer = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages, tools });
      assert.equal(answer.status, 200);
      forwarded.push(chatNames(llm.received.at(-1)!.json.tools));
      messages.push(answer.json.choices[0].message);
    }
    assert.equal(forwarded[0]!.length, 3, `turn 1 trimmed to k: ${forwarded[0]!.join(', ')}`);
    // What makes the case: turn 1's tools are not the first three of the caller's order, so forwarding the request
    // unchanged would break the prefix.
    assert.notDeepEqual(forwarded[0], SIX.slice(0, 3));
    for (let turn = 1; turn < forwarded.length; turn++) {
      assert.equal(forwarded[turn]!.length, SIX.length, `turn ${turn + 1} forwards every tool`);
      assert.deepEqual(forwarded[turn]!.slice(0, forwarded[turn - 1]!.length), forwarded[turn - 1], `turn ${turn + 1}: ${forwarded[turn]!.join(', ')}`);
    }
  });
});

describe('maxTools', () => {
  let llm: StandInLlm;
  let api: RunningRouter;
  const many = syntheticTools(300).map(asFunction);

  before(async () => {
    llm = await startStandInLlm();
    api = await startRouter({ upstreamLlmUrl: llm.url, chat: { maxTools: 128 } });
  });
  after(async () => {
    await api.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it('never forwards more than 128 tools, search tool and keep-rules included', async () => {
    const allowed = many.slice(0, 200).map((tool) => ({ type: 'function', function: { name: tool.function.name } }));
    const answer = await post(
      `${api.url}/v1/chat/completions`,
      { model: 'm', messages: [user('create an invoice in the billing system')], tools: many, tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: allowed } } },
      { 'x-toolrouter-k': '150' },
    );
    assert.equal(answer.status, 200, answer.raw.toString());
    const forwarded = llm.received[0]!.json.tools;
    assert.equal(forwarded.length, 128);
    assert.equal(chatNames(forwarded).at(-1), 'search_tools');
    assert.equal(answer.headers.get('x-toolrouter-tools'), '127/300');
  });

  it('caps a request it would otherwise forward unchanged', async () => {
    const answer = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'assistant', content: 'hello' }], tools: many });
    assert.equal(answer.status, 200);
    assert.equal(llm.received[0]!.json.tools.length, 128);
  });
});

describe('fail-open', () => {
  let llm: StandInLlm;
  let router: Toolrouter;
  let server: Server;
  let url: string;
  let embedder: Embedder;
  /** The embeddings provider, down: every embedding fails. */
  let down = true;

  before(async () => {
    llm = await startStandInLlm();
    const config = loadConfig({}, { port: 0, host: '127.0.0.1', logLevel: 'silent', upstreamLlmUrl: llm.url, catalog: { sources: { fixture: fixtureTools() } } });
    const real = await createEmbedder(config.embedding);
    embedder = {
      modelId: real.modelId,
      cacheKey: real.cacheKey,
      dimensions: real.dimensions,
      embed: (texts) => (down ? Promise.reject(new Error('embeddings provider unreachable')) : real.embed(texts)),
    };
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
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it('forwards the tools unranked when the embeddings provider is down, and says so', async () => {
    const answer = await post(`${url}/v1/chat/completions`, { model: 'm', messages: EMAIL, tools: TOOLS });
    assert.equal(answer.status, 200, answer.raw.toString());
    assert.equal(answer.headers.get('x-toolrouter-fail-open'), 'search_failed');
    assert.deepEqual(llm.received[0]!.json.tools, TOOLS);
  });

  it('forwards the tools unranked while the catalog index is not ready (catalog mode)', async () => {
    assert.equal(router.indexes.current, undefined, 'the catalog could not be indexed');
    const answer = await post(`${url}/v1/chat/completions`, { model: 'm', messages: EMAIL, tools: TOOLS.slice(0, 20) }, { 'x-toolrouter-catalog': 'true' });
    assert.equal(answer.status, 200, answer.raw.toString());
    assert.equal(answer.headers.get('x-toolrouter-fail-open'), 'index_not_ready');
    assert.deepEqual(llm.received[0]!.json.tools, TOOLS.slice(0, 20));
  });

  it('trims again once the provider is back', async () => {
    down = false;
    try {
      const answer = await post(`${url}/v1/chat/completions`, { model: 'm', messages: EMAIL, tools: TOOLS });
      assert.equal(answer.headers.get('x-toolrouter-fail-open'), null);
      assert.ok(llm.received[0]!.json.tools.length < TOOLS.length);
    } finally {
      down = true;
    }
  });

  it('fails the request in OpenAI format instead with chat.failOpen off', async () => {
    const config = loadConfig({}, { port: 0, host: '127.0.0.1', logLevel: 'silent', upstreamLlmUrl: llm.url, chat: { failOpen: false } });
    const strict = await createToolrouter(config, { log: pino({ level: 'silent' }), embedder });
    const strictServer = await listen(strict);
    try {
      const address = strictServer.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      const answer = await post(`http://127.0.0.1:${port}/v1/chat/completions`, { model: 'm', messages: EMAIL, tools: TOOLS });
      assert.equal(answer.status, 500);
      assert.equal(answer.json.error.type, 'server_error');
      assert.equal(llm.received.length, 0);
    } finally {
      await new Promise<void>((resolve) => {
        strictServer.closeAllConnections();
        strictServer.close(() => resolve());
      });
      await strict.close();
    }
  });
});

describe("native mode on the Responses API: OpenAI's client-executed tool_search", () => {
  let llm: StandInLlm;
  let api: RunningRouter;
  const searchCall = (callId: string) => ({
    ...responseObject(),
    id: 'resp_search',
    output: [{ type: 'tool_search_call', id: `ts_${callId}`, call_id: callId, execution: 'client', arguments: ASK, status: 'completed' }],
  });

  before(async () => {
    llm = await startStandInLlm();
    api = await startRouter({ upstreamLlmUrl: llm.url, chat: { k: 1, native: 'auto' } });
  });
  after(async () => {
    await api.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  function assertLoaded(callId: string) {
    const [first, second] = llm.received.map((request) => request.json);
    assert.equal(first.tools.length, RESPONSES_TOOLS.length + 1, 'every tool and the tool_search tool');
    assert.deepEqual(first.tools.at(-1).type, 'tool_search');
    assert.equal(first.tools.at(-1).execution, 'client');
    const loaded = first.tools.filter((tool: any) => tool.type === 'function' && tool.defer_loading !== true);
    assert.equal(loaded.length, 1, chatNames(loaded).join(', '));
    assert.ok(first.tools.some((tool: any) => tool.name === NEEDED && tool.defer_loading === true));
    assert.deepEqual(second.tools, first.tools, 'the tools block does not change: what is found is loaded by the output item');
    const [call, output] = second.input.slice(-2);
    assert.deepEqual(call, { type: 'tool_search_call', call_id: callId, execution: 'client', arguments: ASK });
    assert.equal(output.type, 'tool_search_output');
    assert.equal(output.call_id, callId);
    assert.equal(output.execution, 'client');
    const needed = output.tools.find((tool: any) => tool.name === NEEDED);
    assert.deepEqual(needed, RESPONSES_TOOLS.find((tool) => tool.name === NEEDED), 'the caller\'s own definition, loaded');
  }

  it('not streamed and streamed: defers the tools not kept and answers tool_search_call with tool_search_output', async () => {
    llm.respond(scripted(jsonBody(() => searchCall('call_ts')), jsonBody(() => responseObject('Sunny.'))));
    const plain = await post(`${api.url}/v1/responses`, { model: 'gpt-5.4', input: 'Email Hana the quarterly report summary.', tools: RESPONSES_TOOLS });
    assert.equal(plain.status, 200, plain.raw.toString());
    assert.deepEqual(plain.json, responseObject('Sunny.'));
    assert.equal(plain.headers.get('x-toolrouter-native'), 'on');
    assertLoaded('call_ts');

    llm.reset();
    const events = (() => {
      const final = searchCall('call_ts2');
      const item = (final.output as Record<string, unknown>[])[0]!;
      return [
        { type: 'response.created', sequence_number: 0, response: { ...final, status: 'in_progress', output: [] } },
        { type: 'response.output_item.added', sequence_number: 1, output_index: 0, item: { ...item, status: 'in_progress' } },
        { type: 'response.output_item.done', sequence_number: 2, output_index: 0, item },
        { type: 'response.completed', sequence_number: 3, response: final },
      ].map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    })();
    llm.respond(scripted(sse(() => events), sse(() => [responsesEventStream('Sunny in Lisbon')])));
    const streamed = await post(`${api.url}/v1/responses`, { model: 'gpt-5.4', input: 'Email Ian the quarterly report summary.', tools: RESPONSES_TOOLS, stream: true });
    assert.equal(streamed.raw.toString(), responsesEventStream('Sunny in Lisbon'));
    assertLoaded('call_ts2');
  });

  it('trims models outside chat.nativeModels and requests with their own tool_search', async () => {
    await post(`${api.url}/v1/responses`, { model: 'gpt-4.1', input: 'Email Jan the report.', tools: RESPONSES_TOOLS });
    assert.equal(llm.received[0]!.json.tools.length, 1 + 1);
    await post(`${api.url}/v1/responses`, { model: 'gpt-5.4', input: 'Email Kai the report.', tools: [...RESPONSES_TOOLS, { type: 'tool_search' }] });
    assert.ok(llm.received[1]!.json.tools.every((tool: any) => tool.defer_loading === undefined));
    assert.ok(llm.received[1]!.json.tools.length < RESPONSES_TOOLS.length);
  });
});
