import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import fc from 'fast-check';
import { countTokens } from 'gpt-tokenizer';
import type { Tool } from '../../src/catalog/types.js';
import { upstreamUrl } from '../../src/chat/core/proxy.js';
import { chatDialect } from '../../src/chat/openai-chat/dialect.js';
import { responsesDialect } from '../../src/chat/openai-responses/dialect.js';
import { parseResponsesRequest } from '../../src/chat/openai-responses/request.js';
import { requiredTools } from '../../src/chat/core/select.js';
import { rewriteApi } from '../../src/chat/routes.js';
import { decideActivation } from '../../src/search/activation.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { postJson, responseObject, responsesEventStream, startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';
import { counter } from '../helpers/metrics.js';

/** The fixture's MCP tools as a Responses API caller declares them: function fields at the top level. */
const asResponsesFunction = (tool: Tool) => ({ type: 'function', name: tool.name, description: tool.description, parameters: tool.inputSchema, strict: false });
const TOOLS = fixtureTools().map(asResponsesFunction);
const PINNED = 'web__search';
/** Hosted tools of the Responses API: never ranked, never dropped, forwarded exactly as sent. */
const HOSTED = [
  { type: 'web_search', search_context_size: 'low' },
  { type: 'file_search', vector_store_ids: ['vs_1'] },
  { type: 'code_interpreter', container: { type: 'auto' } },
  { type: 'mcp', server_label: 'deepwiki', server_url: 'https://mcp.deepwiki.com/mcp', require_approval: 'never' },
  { type: 'custom', name: 'freeform_sql', description: 'Run raw SQL', format: { type: 'text' } },
];

const userItem = (text: string) => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
const names = (tools: any[]) => tools.map((tool) => tool.name ?? tool.server_label ?? tool.type);

const post = postJson;


describe('Responses API proxy', () => {
  let llm: StandInLlm;
  let api: RunningRouter;
  let responses: string;
  let rewrite: string;

  before(async () => {
    llm = await startStandInLlm();
    // The search tool and sticky selection have their own tests (chat-search-tool.test.ts); here every request is its own.
    api = await startRouter({ upstreamLlmUrl: llm.url, search: { pinned: [PINNED] }, chat: { searchRounds: 0, stickyConversations: 0 } });
    responses = `${api.url}/v1/responses`;
    rewrite = `${api.url}/v1/tools/rewrite`;
  });
  after(async () => {
    await api.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it('forwards the top-k function tools and every hosted tool untouched, to <base>/responses', async () => {
    const tools = [HOSTED[0], ...TOOLS.slice(0, 20), HOSTED[1], HOSTED[2], ...TOOLS.slice(20), HOSTED[3], HOSTED[4]];
    const body = {
      model: 'gpt-test',
      instructions: 'You are a helpful office assistant.',
      input: [
        { role: 'developer', content: 'Answer briefly.' },
        userItem('I need to let Bob know about the quarterly numbers.'),
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'How should I reach him?' }] },
        userItem('Send Bob an email with the quarterly report summary.'),
      ],
      tools,
      temperature: 0.2,
      store: false,
    };
    const answer = await post(responses, body, { authorization: 'Bearer caller-key' });
    assert.equal(answer.status, 200, answer.raw.toString());
    assert.deepEqual(answer.json, responseObject());
    assert.equal(answer.headers.get('x-request-id'), 'req-standin');

    assert.equal(llm.received.length, 1);
    const sent = llm.received[0]!;
    assert.equal(sent.url, '/v1/responses');
    assert.equal(sent.headers.authorization, 'Bearer caller-key', "the caller's auth goes upstream");
    const forwarded = sent.json.tools as any[];
    // 10 ranked + the pinned tool + 5 hosted tools, none of which take a ranking slot.
    assert.equal(forwarded.length, 16, names(forwarded).join(', '));
    assert.equal(answer.headers.get('x-toolrouter-tools'), `16/${tools.length}`);
    for (const hosted of HOSTED) assert.ok(forwarded.some((tool) => JSON.stringify(tool) === JSON.stringify(hosted)), `${hosted.type} forwarded as sent`);
    assert.ok(names(forwarded).includes('gmail__send_email'), names(forwarded).join(', '));
    assert.ok(names(forwarded).includes(PINNED));
    assert.ok(!names(forwarded).includes('kubernetes__deployments.scale'));
    // Kept tools keep the caller's order (hosted ones included) and definitions.
    const order = names(tools);
    const positions = names(forwarded).map((name) => order.indexOf(name));
    assert.deepEqual(positions, [...positions].sort((a, b) => a - b));
    for (const tool of forwarded.filter((tool) => tool.type === 'function')) assert.deepEqual(tool, TOOLS.find((original) => original.name === tool.name));
    const { tools: _sent, ...rest } = sent.json;
    const { tools: _given, ...expected } = body;
    assert.deepEqual(rest, expected, 'only the tools changed');
    assert.deepEqual(Object.keys(sent.json), Object.keys(body), 'field order is kept');
  });

  it('reads a string input as the user turn', async () => {
    const answer = await post(rewrite, { model: 'm', input: 'what is the weather forecast for Lisbon', tools: TOOLS }, { 'x-toolrouter-k': '3' });
    assert.equal(answer.status, 200, answer.raw.toString());
    assert.equal(answer.json.decision.api, 'responses');
    const ranked = answer.json.decision.kept.filter((tool: any) => tool.reason === 'ranked').map((tool: any) => tool.name);
    assert.equal(ranked.length, 3);
    assert.ok(ranked.includes('weather__get_forecast'), ranked.join(', '));
    assert.equal(answer.headers.get('x-toolrouter-tools'), `4/${TOOLS.length}`);
    assert.deepEqual(names(answer.json.request.tools).length, 4);
  });

  it('keeps function_call and function_call_output tools and whatever tool_choice names, on top of the k ranked', async () => {
    const input = [
      userItem('Will it rain in Paris tomorrow?'),
      { type: 'function_call', call_id: 'call_1', name: 'postgres__query', arguments: '{}' },
      { type: 'function_call_output', call_id: 'call_1', output: '[]' },
      { type: 'function_call', call_id: 'call_2', name: 'github__create_issue', arguments: '{}' },
      userItem('And what about the forecast for the weekend?'),
    ];
    const answer = await post(rewrite, { input, tools: TOOLS, tool_choice: { type: 'function', name: 'slack__post_message' } }, { 'x-toolrouter-k': '3' });
    assert.equal(answer.status, 200, answer.raw.toString());
    const reasons = Object.fromEntries(answer.json.decision.kept.map((tool: any) => [tool.name, tool.reason]));
    assert.equal(reasons.slack__post_message, 'tool_choice');
    assert.equal(reasons.postgres__query, 'tool_result');
    assert.equal(reasons.github__create_issue, 'called');
    assert.equal(reasons[PINNED], 'pinned');
    assert.equal(answer.json.decision.kept.filter((tool: any) => tool.reason === 'ranked').length, 3);
    assert.match(answer.json.decision.query, /forecast for the weekend/);
    assert.deepEqual(names(answer.json.request.tools).sort(), answer.json.decision.kept.map((tool: any) => tool.name).sort());

    // Without the calls and the choice, those tools are not kept: the rules above are what keeps them.
    const plain = await post(rewrite, { input: [input[0], input[4]], tools: TOOLS }, { 'x-toolrouter-k': '3' });
    const kept = plain.json.decision.kept.map((tool: any) => tool.name);
    for (const name of ['slack__post_message', 'postgres__query', 'github__create_issue']) assert.ok(!kept.includes(name), name);
  });

  it('keeps every function an allowed_tools choice names, and forwards the choice as sent', async () => {
    const choice = {
      type: 'allowed_tools',
      mode: 'auto',
      tools: [{ type: 'function', name: 'calendar__create_event' }, { type: 'function', name: 'fs__read_file' }, { type: 'mcp', server_label: 'deepwiki' }],
    };
    const answer = await post(responses, { input: 'weather in Oslo', tools: [...TOOLS, HOSTED[3]], tool_choice: choice }, { 'x-toolrouter-k': '2' });
    assert.equal(answer.status, 200, answer.raw.toString());
    const sent = llm.received[0]!.json;
    assert.deepEqual(sent.tool_choice, choice);
    for (const name of ['calendar__create_event', 'fs__read_file', 'deepwiki', PINNED]) assert.ok(names(sent.tools).includes(name), name);
    assert.equal(sent.tools.length, 2 + 2 + 1 + 1);
  });

  it('forwards a small tool list unchanged, as the very bytes it came in', async () => {
    const raw = `{ "model":"m",\n  "input": "send an email",  "tools": ${JSON.stringify(TOOLS.slice(0, 6))}, "extra": {"kept": [1, 2.50]} }`;
    const answer = await post(responses, raw, { 'x-toolrouter-k': '2' });
    assert.equal(answer.status, 200, answer.raw.toString());
    assert.equal(llm.received[0]!.raw.toString(), raw);
    assert.equal(answer.headers.get('x-toolrouter-tools'), '6/6');
    const dry = await post(rewrite, raw, { 'x-toolrouter-k': '2' });
    assert.equal(dry.json.decision.changed, false);
    assert.deepEqual(dry.json.decision.activation, {
      active: false,
      reason: 'below_threshold',
      tools: 6,
      tokens: TOOLS.slice(0, 6).reduce((sum, tool) => sum + countTokens(JSON.stringify(tool)), 0),
    });
    assert.ok(dry.json.decision.kept.every((tool: any) => tool.reason === 'below_threshold'));
  });

  it('streams the Responses API event stream through byte for byte', { timeout: 15_000 }, async () => {
    const stream = responsesEventStream('The quarterly report is on its way');
    llm.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      // Cut mid-event, as networks do: the proxy must not parse or re-frame.
      const cut = stream.indexOf('response.output_text.delta') + 5;
      res.write(stream.slice(0, cut));
      setTimeout(() => res.end(stream.slice(cut)), 20);
    });
    const response = await fetch(responses, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, input: [userItem('email the team about the report')], tools: [...TOOLS, HOSTED[0]] }),
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.equal(response.headers.get('x-toolrouter-tools'), `12/${TOOLS.length + 1}`);
    const text = await response.text();
    assert.equal(text, stream);
    const events = text.split('\n').filter((line) => line.startsWith('event: ')).map((line) => line.slice(7));
    assert.equal(events[0], 'response.created');
    assert.ok(events.includes('response.output_text.delta'));
    assert.equal(events.at(-1), 'response.completed');
    const sent = llm.received[0]!;
    assert.equal(sent.url, '/v1/responses');
    assert.equal(sent.json.stream, true);
    assert.equal(sent.json.tools.length, 12);
  });

  it('counts kept and dropped tools and saved tokens in the same metrics as chat', async () => {
    const labels = { mode: 'request' };
    const dropped = await counter(api, 'toolrouter_chat_tools_dropped_total', labels);
    const saved = await counter(api, 'toolrouter_chat_tokens_saved_total', labels);
    const answer = await post(responses, { input: 'translate this paragraph into German', tools: TOOLS }, { 'x-toolrouter-k': '4' });
    assert.equal(answer.status, 200);
    const forwarded = new Set(names(llm.received[0]!.json.tools));
    const expectedSaved = TOOLS.filter((tool) => !forwarded.has(tool.name)).reduce((sum, tool) => sum + countTokens(JSON.stringify(tool)), 0);
    assert.equal((await counter(api, 'toolrouter_chat_tools_dropped_total', labels)) - dropped, TOOLS.length - forwarded.size);
    assert.equal((await counter(api, 'toolrouter_chat_tokens_saved_total', labels)) - saved, expectedSaved);
  });

  describe('malformed requests', () => {
    const cases: [string, unknown, string | null][] = [
      ['invalid JSON', '{"input": "hi", ', null],
      ['a body that is not an object', '[1, 2]', null],
      ['input of the wrong type', { input: 42 }, 'input'],
      ['an item that is neither a message nor typed', { input: [{ content: 'hi' }] }, 'input[0]'],
      ['a message item without content', { input: [{ type: 'message', role: 'user' }] }, 'input[0].content'],
      ['a function_call without a name', { input: [{ type: 'function_call', call_id: 'c' }] }, 'input[0].name'],
      ['a function_call_output without call_id', { input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
      ['a function tool without a name', { input: 'x', tools: [{ type: 'function', parameters: {} }] }, 'tools[0].name'],
      ['a chat-style function tool', { input: 'x', tools: [{ type: 'function', function: { name: 'a' } }] }, 'tools[0].name'],
      ['a tool without a type', { input: 'x', tools: [{ name: 'a' }] }, 'tools[0].type'],
      ['parameters that are not an object', { input: 'x', tools: [{ type: 'function', name: 'a', parameters: 'none' }] }, 'tools[0].parameters'],
      ['duplicate function names', { input: 'x', tools: [TOOLS[0], TOOLS[1], TOOLS[0]] }, 'tools[2].name'],
      ['a function tool_choice without a name', { input: 'x', tool_choice: { type: 'function' } }, 'tool_choice.name'],
      ['an allowed_tools entry without a name', { input: 'x', tool_choice: { type: 'allowed_tools', tools: [{ type: 'function' }] } }, 'tool_choice.tools[0].name'],
      ['stream that is not a boolean', { input: 'x', stream: 'yes' }, 'stream'],
    ];
    for (const [label, body, param] of cases) {
      it(`400s on ${label} in OpenAI's error format and forwards nothing`, async () => {
        for (const url of [responses, rewrite]) {
          // The dry run tells the APIs apart by shape: give the odd bodies an input so they read as Responses.
          const answer = await post(url, body);
          assert.equal(answer.status, 400, `${url}: ${answer.raw.toString()}`);
          assert.equal(answer.json.error.type, 'invalid_request_error');
          if (url === responses || typeof body !== 'string') assert.equal(answer.json.error.param, param, answer.json.error.message);
          assert.equal(typeof answer.json.error.message, 'string');
        }
        assert.equal(llm.received.length, 0);
      });
    }
  });

  it('answers random Responses-shaped bodies with 200 or an OpenAI-style 400, never a 500', { timeout: 60_000 }, async () => {
    const any = fc.jsonValue({ maxDepth: 3 });
    const item = fc.oneof(
      any,
      fc.record({ type: fc.constantFrom('message', 'function_call', 'function_call_output', 'reasoning', 'custom_tool_call'), role: any, content: any, name: any, call_id: any }, { requiredKeys: [] }),
      fc.record({ role: fc.constantFrom('user', 'system', 'developer'), content: fc.oneof(fc.string(), fc.array(fc.record({ type: fc.constantFrom('input_text', 'text'), text: any }))) }),
    );
    const tool = fc.oneof(any, fc.constantFrom(...TOOLS.slice(0, 12), ...HOSTED), fc.record({ type: fc.constant('function'), name: any, parameters: any }, { requiredKeys: ['type'] }));
    const body = fc.record(
      {
        input: fc.oneof(fc.string(), fc.array(item, { maxLength: 5 }), any),
        instructions: fc.oneof(fc.string(), any),
        tools: fc.oneof(fc.array(tool, { maxLength: 14 }), any),
        tool_choice: fc.oneof(fc.constantFrom('auto', 'required', { type: 'function', name: TOOLS[0]!.name }), fc.record({ type: fc.constantFrom('function', 'allowed_tools', 'mcp'), name: any, tools: any }, { requiredKeys: ['type'] }), any),
        stream: fc.oneof(fc.boolean(), any),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(body, async (value) => {
        const answer = await post(rewrite, value);
        assert.ok(answer.status === 200 || answer.status === 400, `${answer.status}: ${answer.raw.toString()}`);
        if (answer.status === 400) assert.equal(answer.json.error.type, 'invalid_request_error');
      }),
      { numRuns: 150 },
    );
  });

  describe('catalog mode', () => {
    before(async () => {
      const put = await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      await api.indexed();
    });
    after(async () => {
      await api.request('DELETE', '/v1/catalog/sources/fixture');
    });

    it("sends the catalog's best matches as Responses function tools (strict off), hosted tools kept", async () => {
      const answer = await post(responses, { input: 'Merge the open pull request for the login fix.', tools: [HOSTED[0]] }, { 'x-toolrouter-catalog': 'true', 'x-toolrouter-k': '3' });
      assert.equal(answer.status, 200, answer.raw.toString());
      const forwarded = llm.received[0]!.json.tools as any[];
      assert.deepEqual(forwarded[0], HOSTED[0]);
      assert.ok(names(forwarded).includes('github__merge_pull_request'), names(forwarded).join(', '));
      const catalogTools = new Map(fixtureTools().map((tool) => [tool.name, tool]));
      for (const tool of forwarded.slice(1)) {
        const source = catalogTools.get(tool.name)!;
        assert.deepEqual(tool, { type: 'function', name: source.name, description: source.description, parameters: source.inputSchema, strict: false });
      }
      assert.equal(forwarded.length, 1 + 1 + 3, 'hosted + pinned + 3 ranked');
    });
  });
});

describe('rewriter activation threshold', () => {
  let llm: StandInLlm;
  let api: RunningRouter;

  before(async () => {
    llm = await startStandInLlm();
    // 20 tools or 1,000 tokens: the fixture's first 15 tools are under the count but over the budget.
    api = await startRouter({ upstreamLlmUrl: llm.url, search: { activation: { maxTools: 20, maxTokens: 1_000 } }, chat: { searchRounds: 0, stickyConversations: 0 } });
  });
  after(async () => {
    await api.close();
    await llm.close();
  });

  const chatTools = (tools: Tool[]) => tools.map((tool) => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.inputSchema } }));

  it('trims past the token budget and forwards unchanged below both thresholds, for chat and responses alike', async () => {
    const few = fixtureTools().slice(0, 15);
    const fewTokens = few.map(asResponsesFunction).reduce((sum, tool) => sum + countTokens(JSON.stringify(tool)), 0);
    assert.ok(fewTokens > 1_000, `fixture tools are ${fewTokens} tokens`);
    const small = fixtureTools().slice(0, 4);
    for (const [path, body] of [
      ['/v1/responses', (tools: Tool[]) => ({ input: 'create a calendar event', tools: tools.map(asResponsesFunction) })],
      ['/v1/chat/completions', (tools: Tool[]) => ({ messages: [{ role: 'user', content: 'create a calendar event' }], tools: chatTools(tools) })],
    ] as const) {
      llm.reset();
      const over = await post(`${api.url}${path}`, body(few), { 'x-toolrouter-k': '2' });
      assert.equal(over.status, 200, over.raw.toString());
      assert.equal(over.headers.get('x-toolrouter-tools'), '2/15', path);
      const under = await post(`${api.url}${path}`, body(small), { 'x-toolrouter-k': '2' });
      assert.equal(under.headers.get('x-toolrouter-tools'), '4/4', path);
      assert.equal(llm.received[1]!.raw.toString(), JSON.stringify(body(small)), 'forwarded byte-identical');
      const dry = await post(`${api.url}/v1/tools/rewrite`, body(few), { 'x-toolrouter-k': '2' });
      assert.equal(dry.json.decision.activation.reason, 'token_budget');
      assert.equal(dry.json.decision.api, path === '/v1/responses' ? 'responses' : 'chat');
    }
  });
});

describe('rewriter activation threshold: catalog mode', () => {
  let api: RunningRouter;

  before(async () => {
    api = await startRouter({ search: { activation: { maxTools: 5, maxTokens: 10_000 } } });
    const put = await api.request('PUT', '/v1/catalog/sources/small', { tools: fixtureTools().slice(0, 3) });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await api.indexed();
  });
  after(async () => {
    await api.close();
  });

  it('sends a catalog within the threshold whole, next to the request tools, and ranks once it is over', async () => {
    const own = { type: 'function', name: 'local_helper', description: 'A helper of the caller', parameters: { type: 'object' } };
    const body = { input: 'something unrelated to every tool', tools: [own, HOSTED[0]] };
    const small = await post(`${api.url}/v1/tools/rewrite`, body, { 'x-toolrouter-catalog': 'true', 'x-toolrouter-k': '1' });
    assert.equal(small.status, 200, small.raw.toString());
    assert.deepEqual(small.json.decision.activation.reason, 'below_threshold');
    assert.deepEqual(
      small.json.decision.kept.map((tool: any) => `${tool.name}/${tool.reason}/${tool.source}`),
      ['local_helper/below_threshold/request', 'web_search/not_a_function/request', ...fixtureTools().slice(0, 3).map((tool) => `${tool.name}/below_threshold/catalog`)],
    );
    assert.equal(small.json.request.tools.length, 5);

    // Three more catalog tools (7 with the caller's own): over maxTools, so catalog mode ranks and replaces again.
    const put = await api.request('PUT', '/v1/catalog/sources/small', { tools: fixtureTools().slice(0, 6) });
    assert.equal(put.status, 200);
    await api.indexed();
    const big = await post(`${api.url}/v1/tools/rewrite`, { ...body, input: 'send an email' }, { 'x-toolrouter-catalog': 'true', 'x-toolrouter-k': '1' });
    assert.deepEqual(big.json.decision.activation, { active: true, reason: 'tool_count', tools: 7 });
    assert.deepEqual(big.json.decision.dropped, [{ name: 'local_helper', reason: 'replaced_by_catalog' }]);
    assert.ok(big.json.request.tools.length <= 2, JSON.stringify(big.json.request.tools.map((tool: any) => tool.name)));
  });
});

describe('responses parsing and shared rules', () => {
  it('maps function_call_output items to their call by call_id and reads instructions only as a fallback', () => {
    const request = parseResponsesRequest({
      instructions: 'Manage the calendar.',
      input: [
        { type: 'function_call', call_id: 'a', name: 'one', arguments: '{}' },
        { type: 'function_call_output', call_id: 'a', output: 'x' },
        { type: 'function_call_output', call_id: 'from_an_earlier_response', output: 'y' },
        { type: 'custom_tool_call', call_id: 'b', name: 'two', input: 'SELECT 1' },
        { type: 'reasoning', id: 'rs_1', summary: [] },
        { type: 'item_reference', id: 'msg_1' },
      ],
      tool_choice: { type: 'custom', name: 'three' },
    });
    assert.deepEqual(request.toolUse, { called: ['one', 'two'], results: ['one'] });
    assert.deepEqual(
      [...requiredTools(request, ['pinned'])],
      [
        ['three', 'tool_choice'],
        ['one', 'tool_result'],
        ['two', 'called'],
        ['pinned', 'pinned'],
      ],
    );
    assert.deepEqual(request.turns, [{ role: 'system', content: 'Manage the calendar.' }]);
  });

  it('tells dry-run bodies apart by shape', () => {
    assert.equal(rewriteApi({ messages: [], input: 'x' }), 'chat');
    assert.equal(rewriteApi({ input: 'x' }), 'responses');
    assert.equal(rewriteApi({ previous_response_id: 'resp_1', tools: [] }), 'responses');
    assert.equal(rewriteApi({ tools: [] }), 'chat');
  });

  it('builds the upstream URL for either API from one base', () => {
    assert.equal(upstreamUrl('https://api.example.com/v1', responsesDialect.upstream.route, '/v1/responses'), 'https://api.example.com/v1/responses');
    assert.equal(upstreamUrl('https://api.example.com/v1/', responsesDialect.upstream.route, '/v1/responses?x=1'), 'https://api.example.com/v1/responses?x=1');
    assert.equal(upstreamUrl('https://x.example.com/openai/chat/completions', responsesDialect.upstream.route, '/v1/responses'), 'https://x.example.com/openai/responses');
    assert.equal(upstreamUrl('https://x.example.com/openai/responses', chatDialect.upstream.route, '/v1/chat/completions'), 'https://x.example.com/openai/chat/completions');
  });

  it('decides activation by count first and counts tokens only for short lists', () => {
    let counted = 0;
    const tokens = () => {
      counted++;
      return 50;
    };
    const limits = { maxTools: 3, maxTokens: 100 };
    assert.deepEqual(decideActivation('auto', limits, 4, tokens), { active: true, reason: 'tool_count', tools: 4 });
    assert.equal(counted, 0);
    assert.deepEqual(decideActivation('auto', limits, 3, tokens), { active: false, reason: 'below_threshold', tools: 3, tokens: 50 });
    assert.deepEqual(decideActivation('auto', { maxTools: 3, maxTokens: 49 }, 3, tokens), { active: true, reason: 'token_budget', tools: 3, tokens: 50 });
    assert.deepEqual(decideActivation(false, limits, 400, tokens), { active: false, reason: 'forced', tools: 400 });
    assert.deepEqual(decideActivation(true, limits, 0, tokens), { active: true, reason: 'forced', tools: 0 });
    assert.equal(counted, 2);
  });
});
