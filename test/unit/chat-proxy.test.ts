import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { countTokens } from 'gpt-tokenizer';
import type { Tool } from '../../src/catalog/types.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { completion, postJson, startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';
import { counter } from '../helpers/metrics.js';

/** The fixture's MCP tools as an OpenAI caller would declare them. */
const asFunction = (tool: Tool) => ({
  type: 'function',
  function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
});
const TOOLS = fixtureTools().map(asFunction);
const PINNED = 'web__search';

const user = (content: unknown) => ({ role: 'user', content });

const post = postJson;


const names = (tools: any[]) => tools.map((tool) => tool.function?.name ?? tool.type);

/** Asserts `subset` appears in `list` in the same relative order. */
function assertSubsequence(subset: string[], list: string[]) {
  let at = 0;
  for (const name of subset) {
    const found = list.indexOf(name, at);
    assert.ok(found >= 0, `${name} out of order or missing in ${list.join(', ')}`);
    at = found + 1;
  }
}

describe('chat completions proxy', () => {
  let llm: StandInLlm;
  let api: RunningRouter;
  let completions: string;
  let rewrite: string;

  before(async () => {
    llm = await startStandInLlm();
    // The search tool and sticky selection have their own tests (chat-search-tool.test.ts); here every request is its own.
    api = await startRouter({ upstreamLlmUrl: llm.url, search: { pinned: [PINNED] }, chat: { searchRounds: 0, stickyConversations: 0 } });
    completions = `${api.url}/v1/chat/completions`;
    rewrite = `${api.url}/v1/tools/rewrite`;
  });
  after(async () => {
    await api.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  describe('trimming', () => {
    it('forwards only the top-k tools for the conversation, as the caller defined them and in their order', async () => {
      const body = {
        model: 'gpt-test',
        temperature: 0.2,
        messages: [
          { role: 'system', content: 'You are a helpful office assistant.' },
          user('I need to let Bob know about the quarterly numbers.'),
          { role: 'assistant', content: 'Sure, how should I reach him?' },
          user([{ type: 'text', text: 'Send Bob an email with the quarterly report summary.' }]),
        ],
        tools: TOOLS,
        user: 'end-user-42',
      };
      const answer = await post(completions, body);
      assert.equal(answer.status, 200, answer.raw.toString());
      assert.deepEqual(answer.json, completion());
      assert.equal(answer.headers.get('x-request-id'), 'req-standin', 'upstream headers reach the caller');

      assert.equal(llm.received.length, 1);
      const sent = llm.received[0]!;
      assert.equal(sent.url, '/v1/chat/completions');
      const forwarded = sent.json.tools as any[];
      // Default k is 10, plus the pinned tool, which never takes a ranking slot.
      assert.equal(forwarded.length, 11);
      assert.equal(answer.headers.get('x-toolrouter-tools'), `11/${TOOLS.length}`);
      assert.ok(names(forwarded).includes('gmail__send_email'), names(forwarded).join(', '));
      assert.ok(names(forwarded).includes(PINNED));
      assert.ok(!names(forwarded).includes('kubernetes__deployments.scale'), 'an unrelated tool was kept');
      assertSubsequence(names(forwarded), names(TOOLS));
      for (const tool of forwarded) assert.deepEqual(tool, TOOLS.find((original) => original.function.name === tool.function.name));
      // Only the tools changed.
      const { tools: _tools, ...rest } = sent.json;
      const { tools: _original, ...expectedRest } = body;
      assert.deepEqual(rest, expectedRest);
      assert.deepEqual(Object.keys(sent.json), Object.keys(body), 'field order is kept');
    });

    it('honours x-toolrouter-k per request', async () => {
      const answer = await post(completions, { model: 'm', messages: [user('what is the weather forecast for Lisbon')], tools: TOOLS }, { 'x-toolrouter-k': '3' });
      assert.equal(answer.status, 200);
      const forwarded = names(llm.received[0]!.json.tools);
      assert.equal(forwarded.length, 4, forwarded.join(', '));
      assert.ok(forwarded.includes('weather__get_forecast'), forwarded.join(', '));
      assert.equal(answer.headers.get('x-toolrouter-tools'), `4/${TOOLS.length}`);
      assert.equal(llm.received[0]!.headers['x-toolrouter-k'], undefined, 'toolrouter headers are not forwarded');
    });

    it('ranks by the last user turn first', async () => {
      const messages = [user('Translate this paragraph into German.'), { role: 'assistant', content: 'Done.' }, user('Now check the air quality in Berlin.')];
      const answer = await post(rewrite, { messages, tools: TOOLS }, { 'x-toolrouter-k': '1' });
      assert.equal(answer.status, 200);
      const ranked = answer.json.decision.kept.filter((tool: any) => tool.reason === 'ranked');
      assert.deepEqual(ranked.map((tool: any) => tool.name), ['weather__get_air_quality']);
    });
  });

  describe('keep-rules', () => {
    const conversation = [
      user('Will it rain in Paris tomorrow?'),
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'postgres__query', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '[]' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_2', type: 'function', function: { name: 'stripe__create-refund', arguments: '{}' } }] },
      { role: 'function', name: 'jira__addComment', content: 'ok' },
      user('And the forecast for the weekend?'),
    ];

    it('keeps tool_choice, tool-result, called and pinned tools on top of the k ranked ones', async () => {
      const body = { messages: conversation, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'fs__delete_file' } } };
      const answer = await post(rewrite, body, { 'x-toolrouter-k': '2' });
      assert.equal(answer.status, 200, answer.raw.toString());
      const { decision, request } = answer.json;
      const reasons = Object.fromEntries(decision.kept.map((tool: any) => [tool.name, tool.reason]));
      assert.equal(reasons.fs__delete_file, 'tool_choice');
      assert.equal(reasons.postgres__query, 'tool_result');
      assert.equal(reasons['stripe__create-refund'], 'called');
      assert.equal(reasons.jira__addComment, 'tool_result');
      assert.equal(reasons[PINNED], 'pinned');
      const ranked = decision.kept.filter((tool: any) => tool.reason === 'ranked');
      assert.equal(ranked.length, 2);
      assert.ok(ranked.every((tool: any) => tool.name.startsWith('weather__') && typeof tool.score === 'number'), JSON.stringify(ranked));
      assert.equal(decision.kept.length, 7);
      assert.equal(decision.dropped.length, TOOLS.length - 7);
      assert.ok(decision.dropped.every((tool: any) => tool.reason === 'below_top_k'));
      assert.deepEqual(names(request.tools), decision.kept.map((tool: any) => tool.name).filter((name: string) => names(TOOLS).includes(name)));
      assert.equal(answer.headers.get('x-toolrouter-tools'), `7/${TOOLS.length}`);
      assert.equal(decision.changed, true);
      assert.match(decision.query, /forecast for the weekend/);
    });

    it('the same conversation without those calls drops those tools (the rules above are what keeps them)', async () => {
      const answer = await post(rewrite, { messages: [conversation[0], conversation.at(-1)], tools: TOOLS }, { 'x-toolrouter-k': '2' });
      const kept = answer.json.decision.kept.map((tool: any) => tool.name);
      for (const name of ['fs__delete_file', 'postgres__query', 'stripe__create-refund', 'jira__addComment']) assert.ok(!kept.includes(name), name);
      assert.deepEqual(kept.length, 3);
    });

    it('keeps every tool of an allowed_tools choice', async () => {
      const choice = {
        type: 'allowed_tools',
        allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'maps__geocode-address' } }, { type: 'function', function: { name: 'sentry__listIssues' } }] },
      };
      const answer = await post(rewrite, { messages: [user('Will it rain?')], tools: TOOLS, tool_choice: choice }, { 'x-toolrouter-k': '1' });
      const reasons = Object.fromEntries(answer.json.decision.kept.map((tool: any) => [tool.name, tool.reason]));
      assert.equal(reasons['maps__geocode-address'], 'tool_choice');
      assert.equal(reasons.sentry__listIssues, 'tool_choice');
    });

    it('forwards the rule-kept tools upstream, never dropping the tool whose result the model reads', async () => {
      const answer = await post(completions, { model: 'm', messages: conversation, tools: TOOLS }, { 'x-toolrouter-k': '1' });
      assert.equal(answer.status, 200);
      const forwarded = names(llm.received[0]!.json.tools);
      for (const name of ['postgres__query', 'stripe__create-refund', 'jira__addComment', PINNED]) assert.ok(forwarded.includes(name), name);
      assert.equal(forwarded.length, 5);
      assert.deepEqual(llm.received[0]!.json.messages, conversation);
    });

    it('always forwards non-function tools', async () => {
      const custom = { type: 'custom', custom: { name: 'freeform_sql', description: 'Run SQL' } };
      const answer = await post(rewrite, { messages: [user('weather in Rome')], tools: [...TOOLS, custom] }, { 'x-toolrouter-k': '1' });
      assert.deepEqual(answer.json.request.tools.at(-1), custom);
      assert.ok(answer.json.decision.kept.some((tool: any) => tool.name === 'freeform_sql' && tool.reason === 'not_a_function'));
    });
  });

  describe('unchanged requests', () => {
    it('forwards a request with no more tools than k as the very bytes it came in', async () => {
      // Odd spacing, key order, escapes and a field toolrouter knows nothing about: all must survive.
      const raw = `{ "tools" : [${JSON.stringify(TOOLS[0])},\n ${JSON.stringify(TOOLS[1])}, ${JSON.stringify(TOOLS[2])}],\n  "messages":[{"role":"user","content":"caf\\u00e9 \u00e9t\u00e9 \ud83d\ude00"}],\n"model":"m", "x_vendor": {"a": 1.50}  }`;
      const answer = await post(completions, raw);
      assert.equal(answer.status, 200);
      assert.ok(llm.received[0]!.raw.equals(Buffer.from(raw, 'utf8')), 'forwarded body differs from the request');
      assert.equal(answer.headers.get('x-toolrouter-tools'), '3/3');
    });

    it('forwards unchanged when the rule-kept tools leave nothing to drop, and when there are no tools', async () => {
      const tools = TOOLS.slice(0, 12);
      const messages = [
        user('read the file'),
        {
          role: 'assistant',
          tool_calls: tools.slice(0, 2).map((tool, i) => ({ id: `c${i}`, type: 'function', function: { name: tool.function.name, arguments: '{}' } })),
        },
      ];
      const raw = JSON.stringify({ model: 'm', messages, tools }, null, 2);
      const answer = await post(completions, raw);
      assert.equal(answer.status, 200);
      assert.ok(llm.received[0]!.raw.equals(Buffer.from(raw)));
      assert.equal(answer.headers.get('x-toolrouter-tools'), '12/12');

      const plain = JSON.stringify({ model: 'm', messages: [user('hello')] });
      assert.equal((await post(completions, plain)).status, 200);
      assert.ok(llm.received[1]!.raw.equals(Buffer.from(plain)));
    });

    it('forwards unchanged when the conversation has nothing to rank with', async () => {
      const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }], tools: TOOLS });
      const answer = await post(completions, body);
      assert.equal(answer.status, 200);
      assert.ok(llm.received[0]!.raw.equals(Buffer.from(body)));
      const dry = await post(rewrite, body);
      assert.equal(dry.json.decision.changed, false);
      assert.ok(dry.json.decision.kept.every((tool: any) => tool.reason === 'no_query' || tool.reason === 'pinned'));
    });
  });

  describe('streaming', () => {
    it('streams SSE through byte for byte, chunk by chunk as the upstream sends it', { timeout: 15_000 }, async () => {
      const euro = Buffer.from('€', 'utf8');
      const parts = [
        Buffer.concat([Buffer.from('data: {"id":"c","choices":[{"delta":{"content":"price '), euro.subarray(0, 2)]),
        Buffer.concat([euro.subarray(2), Buffer.from('5"}}]}\n\n: keep-alive comment\n\ndata: {"id":"c","choices":[{"delta":{}, "finish_reason":"stop"}]}\n\n')]),
        Buffer.from('data: [DONE]\n\n'),
      ];
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      llm.respond(async (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
        res.write(parts[0]);
        // The rest waits until the caller has seen the first chunk: a buffering proxy would deadlock here.
        await released;
        res.write(parts[1]);
        res.end(parts[2]);
      });
      const response = await fetch(completions, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [user('email the team')], tools: TOOLS }),
      });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('content-type'), 'text/event-stream; charset=utf-8');
      assert.equal(response.headers.get('x-toolrouter-tools'), `11/${TOOLS.length}`);
      const reader = response.body!.getReader();
      const received: Buffer[] = [];
      const first = await within(5_000, reader.read(), 'the first chunk did not arrive while the upstream was still streaming');
      received.push(Buffer.from(first.value!));
      assert.ok(parts[0]!.equals(received[0]!), 'first chunk arrives alone, before the upstream continues');
      release();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        received.push(Buffer.from(value));
      }
      assert.ok(Buffer.concat(received).equals(Buffer.concat(parts)), 'streamed bytes differ');
      assert.equal(llm.received[0]!.json.stream, true);
      assert.equal(llm.received[0]!.json.tools.length, 11);
    });

    it('stops the upstream request when the caller hangs up mid-stream', { timeout: 15_000 }, async () => {
      let upstreamClosed!: () => void;
      const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
      llm.respond((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"n":1}\n\n');
        const tick = setInterval(() => res.write('data: {"n":2}\n\n'), 20);
        res.on('close', () => {
          clearInterval(tick);
          upstreamClosed();
        });
      });
      const controller = new AbortController();
      const response = await fetch(completions, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [user('hi')] }),
        signal: controller.signal,
      });
      await response.body!.getReader().read();
      controller.abort();
      await within(5_000, closed, 'the upstream is still streaming');
    });
  });

  describe('upstream errors', () => {
    const cases = [
      { status: 401, type: 'application/json', body: '{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}', headers: {} },
      { status: 429, type: 'application/json; charset=utf-8', body: '{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}', headers: { 'retry-after': '7' } },
      { status: 500, type: 'application/json', body: '{"error":{"message":"The server had an error","type":"server_error"}}', headers: {} },
      { status: 503, type: 'text/html', body: '<html><body>upstream overloaded</body></html>', headers: {} },
    ];
    for (const failure of cases) {
      it(`passes a ${failure.status} with its body and headers through unchanged`, async () => {
        llm.respond((_req, res) => {
          res.writeHead(failure.status, { 'content-type': failure.type, ...failure.headers });
          res.end(failure.body);
        });
        const answer = await post(completions, { model: 'm', messages: [user('send an email')], tools: TOOLS });
        assert.equal(answer.status, failure.status);
        assert.equal(answer.raw.toString('utf8'), failure.body);
        assert.equal(answer.headers.get('content-type'), failure.type);
        for (const [name, value] of Object.entries(failure.headers)) assert.equal(answer.headers.get(name), value);
        assert.equal(answer.headers.get('x-toolrouter-tools'), `11/${TOOLS.length}`);
      });
    }

    it("passes the caller's Authorization, OpenAI headers and query string through", async () => {
      const answer = await fetch(`${completions}?api-version=2024-10-21`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-caller', 'openai-organization': 'org-1', 'x-toolrouter-catalog': 'false' },
        body: JSON.stringify({ model: 'm', messages: [user('hi')] }),
      });
      assert.equal(answer.status, 200);
      const sent = llm.received[0]!;
      assert.equal(sent.url, '/v1/chat/completions?api-version=2024-10-21');
      assert.equal(sent.headers.authorization, 'Bearer sk-caller');
      assert.equal(sent.headers['openai-organization'], 'org-1');
      assert.equal(sent.headers['x-toolrouter-catalog'], undefined);
    });
  });

  describe('malformed requests', () => {
    const messages = [user('hi')];
    const fn = (name: unknown) => ({ type: 'function', function: { name, parameters: { type: 'object' } } });
    const cases: { label: string; body: unknown; headers?: Record<string, string>; param: string | null; code?: string }[] = [
      { label: 'invalid JSON', body: '{"messages": [', param: null, code: 'invalid_json' },
      { label: 'an empty body', body: '', param: null },
      { label: 'a JSON array', body: '[1, 2]', param: null, code: 'invalid_json' },
      { label: 'no messages', body: { model: 'm' }, param: 'messages' },
      { label: 'messages not a list', body: { messages: 'hi' }, param: 'messages' },
      { label: 'an empty message list', body: { messages: [] }, param: 'messages' },
      { label: 'a message without role', body: { messages: [{ content: 'x' }] }, param: 'messages[0].role' },
      { label: 'a bad tool_calls entry', body: { messages: [{ role: 'assistant', tool_calls: [{ function: { name: 7 } }] }] }, param: 'messages[0].tool_calls[0].function.name' },
      { label: 'tools not a list', body: { messages, tools: { a: 1 } }, param: 'tools' },
      { label: 'a tool that is not an object', body: { messages, tools: ['search'] }, param: 'tools[0]' },
      { label: 'a function tool without function', body: { messages, tools: [{ type: 'function' }] }, param: 'tools[0].function' },
      { label: 'a function without name', body: { messages, tools: [{ type: 'function', function: { description: 'x' } }] }, param: 'tools[0].function.name' },
      { label: 'a name with spaces', body: { messages, tools: [fn('send email')] }, param: 'tools[0].function.name' },
      { label: 'parameters that are not an object', body: { messages, tools: [{ type: 'function', function: { name: 'a', parameters: 'x' } }] }, param: 'tools[0].function.parameters' },
      { label: 'duplicate names', body: { messages, tools: [fn('a'), fn('b'), fn('a')] }, param: 'tools[2].function.name', code: 'duplicate_tool_name' },
      { label: 'a tool_choice naming nothing', body: { messages, tools: [fn('a')], tool_choice: { type: 'function', function: {} } }, param: 'tool_choice.function.name' },
      { label: 'a tool_choice of the wrong kind', body: { messages, tool_choice: 3 }, param: 'tool_choice' },
      { label: 'stream not a boolean', body: { messages, stream: 'yes' }, param: 'stream' },
      { label: 'a bad x-toolrouter-k', body: { messages }, headers: { 'x-toolrouter-k': 'ten' }, param: 'x-toolrouter-k', code: 'invalid_header' },
      { label: 'x-toolrouter-k of 0', body: { messages }, headers: { 'x-toolrouter-k': '0' }, param: 'x-toolrouter-k', code: 'invalid_header' },
      { label: 'a bad x-toolrouter-catalog', body: { messages }, headers: { 'x-toolrouter-catalog': 'maybe' }, param: 'x-toolrouter-catalog', code: 'invalid_header' },
    ];
    for (const { label, body, headers, param, code } of cases) {
      it(`400s on ${label} in OpenAI's error format and forwards nothing`, async () => {
        for (const url of [completions, rewrite]) {
          const answer = await post(url, body, headers);
          assert.equal(answer.status, 400, `${url}: ${answer.raw.toString()}`);
          assert.deepEqual(Object.keys(answer.json), ['error']);
          assert.deepEqual(Object.keys(answer.json.error).sort(), ['code', 'message', 'param', 'type']);
          assert.equal(answer.json.error.type, 'invalid_request_error');
          assert.equal(typeof answer.json.error.message, 'string');
          assert.equal(answer.json.error.param, param, answer.json.error.message);
          if (code) assert.equal(answer.json.error.code, code);
        }
        assert.equal(llm.received.length, 0);
      });
    }

    it('413s on a body over the limit, in the same format', async () => {
      const big = JSON.stringify({ messages, padding: 'x'.repeat(21 * 1024 * 1024) });
      const answer = await post(completions, big);
      assert.equal(answer.status, 413);
      assert.equal(answer.json.error.code, 'payload_too_large');
      assert.equal(llm.received.length, 0);
    });
  });

  describe('tool-list cache', () => {
    // A list no other test uses, so the first request is a miss whatever ran before.
    const tools = TOOLS.map((tool, i) => (i === 0 ? { ...tool, function: { ...tool.function, description: `${tool.function.description} (cache test)` } } : tool));
    const lookups = (result: string) => counter(api, 'toolrouter_chat_tool_index_lookups_total', { result });

    it('indexes a tool list once and reuses it for the next requests with the same list', async () => {
      const [hits, misses] = [await lookups('hit'), await lookups('miss')];
      const first = await post(rewrite, { messages: [user('send an email')], tools }, { 'x-toolrouter-k': '2' });
      assert.equal(first.json.decision.cache, 'miss');
      const second = await post(rewrite, { messages: [user('what is the weather')], tools }, { 'x-toolrouter-k': '2' });
      assert.equal(second.json.decision.cache, 'hit');
      assert.ok(second.json.decision.kept.some((tool: any) => tool.name.startsWith('weather__') && tool.reason === 'ranked'));
      assert.equal(await lookups('miss'), misses + 1);
      assert.equal(await lookups('hit'), hits + 1);

      const changed = tools.map((tool, i) => (i === 1 ? { ...tool, function: { ...tool.function, description: 'changed' } } : tool));
      const third = await post(rewrite, { messages: [user('send an email')], tools: changed }, { 'x-toolrouter-k': '2' });
      assert.equal(third.json.decision.cache, 'miss', 'a changed description is a different list');
    });

    it('builds a list once when requests for it arrive together', async () => {
      const fresh = TOOLS.map((tool, i) => (i === 2 ? { ...tool, function: { ...tool.function, description: 'concurrent test' } } : tool));
      const misses = await lookups('miss');
      const answers = await Promise.all(
        ['send an email', 'create a calendar event', 'scale the deployment'].map((text) => post(rewrite, { messages: [user(text)], tools: fresh })),
      );
      assert.deepEqual(answers.map((answer) => answer.json.decision.cache).sort(), ['hit', 'hit', 'miss']);
      assert.equal(await lookups('miss'), misses + 1);
    });
  });

  describe('metrics', () => {
    it('counts kept and dropped tools and the tokens of the dropped definitions', async () => {
      const labels = { mode: 'request' };
      const before = {
        kept: await counter(api, 'toolrouter_chat_tools_kept_total', labels),
        dropped: await counter(api, 'toolrouter_chat_tools_dropped_total', labels),
        saved: await counter(api, 'toolrouter_chat_tokens_saved_total', labels),
      };
      const answer = await post(completions, { model: 'm', messages: [user('open a GitHub issue for the crash')], tools: TOOLS });
      assert.equal(answer.status, 200);
      const forwarded = new Set(names(llm.received[0]!.json.tools));
      const dropped = TOOLS.filter((tool) => !forwarded.has(tool.function.name));
      const expectedSaved = dropped.reduce((sum, tool) => sum + countTokens(JSON.stringify(tool)), 0);
      assert.ok(expectedSaved > 1_000, `${expectedSaved}`);
      assert.equal(await counter(api, 'toolrouter_chat_tools_kept_total', labels), before.kept + forwarded.size);
      assert.equal(await counter(api, 'toolrouter_chat_tools_dropped_total', labels), before.dropped + dropped.length);
      assert.equal(await counter(api, 'toolrouter_chat_tokens_saved_total', labels), before.saved + expectedSaved);

      const dry = await post(rewrite, { messages: [user('open a GitHub issue for the crash')], tools: TOOLS });
      assert.equal(dry.json.decision.tokens.saved, expectedSaved);
      assert.equal(dry.json.decision.tokens.before, TOOLS.reduce((sum, tool) => sum + countTokens(JSON.stringify(tool)), 0));
      assert.equal(await counter(api, 'toolrouter_chat_tokens_saved_total', labels), before.saved + expectedSaved, 'dry runs are not counted');
    });
  });

  describe('catalog mode', () => {
    before(async () => {
      const put = await api.request('PUT', '/v1/catalog/sources/fixture', { tools: fixtureTools() });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      await api.indexed();
    });

    it("replaces the request's tools with the catalog's best matches in OpenAI function format", async () => {
      const own = { type: 'function', function: { name: 'local_helper', description: 'A helper of the caller', parameters: { type: 'object' } } };
      const messages = [
        user('Merge the open pull request for the login fix.'),
        { role: 'assistant', tool_calls: [{ id: 'x', type: 'function', function: { name: 'gmail__send_email', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'x', content: 'sent' },
      ];
      const answer = await post(completions, { model: 'm', messages, tools: [own] }, { 'x-toolrouter-catalog': 'true', 'x-toolrouter-k': '3' });
      assert.equal(answer.status, 200, answer.raw.toString());
      const forwarded = llm.received[0]!.json.tools as any[];
      const forwardedNames = names(forwarded);
      assert.ok(forwardedNames.includes('github__merge_pull_request'), forwardedNames.join(', '));
      assert.ok(!forwardedNames.includes('local_helper'), 'the request tool nobody needs was replaced');
      assert.ok(forwardedNames.includes('gmail__send_email'), 'the tool whose result is in the conversation comes from the catalog');
      assert.ok(forwardedNames.includes(PINNED), 'pinned catalog tools are included');
      assert.equal(forwarded.length, 5);
      const catalogTools = new Map(fixtureTools().map((tool) => [tool.name, tool]));
      for (const tool of forwarded) {
        const source = catalogTools.get(tool.function.name)!;
        assert.deepEqual(tool, { type: 'function', function: { name: source.name, description: source.description, parameters: source.inputSchema } });
      }
      assert.equal(answer.headers.get('x-toolrouter-tools'), `5/${fixtureTools().length + 1}`);

      const dry = await post(rewrite, { messages, tools: [own] }, { 'x-toolrouter-catalog': 'true', 'x-toolrouter-k': '3' });
      assert.equal(dry.json.decision.mode, 'catalog');
      assert.deepEqual(dry.json.decision.dropped, [{ name: 'local_helper', reason: 'replaced_by_catalog' }]);
      const reasons = Object.fromEntries(dry.json.decision.kept.map((tool: any) => [tool.name, `${tool.reason}/${tool.source}`]));
      assert.equal(reasons.gmail__send_email, 'tool_result/catalog');
      assert.equal(reasons[PINNED], 'pinned/catalog');
    });

    it("keeps the request's own definition of a tool the rules keep", async () => {
      const own = { type: 'function', function: { name: 'local_helper', description: 'mine', parameters: { type: 'object' } } };
      const answer = await post(
        rewrite,
        { messages: [user('weather in Oslo')], tools: [own], tool_choice: { type: 'function', function: { name: 'local_helper' } } },
        { 'x-toolrouter-catalog': '1', 'x-toolrouter-k': '2' },
      );
      assert.deepEqual(answer.json.request.tools[0], own);
      assert.ok(names(answer.json.request.tools).some((name: string) => name.startsWith('weather__')));
    });
  });
});

describe('chat completions proxy: configuration', () => {
  it('answers 503 without an upstream, while /v1/tools/rewrite still works', async () => {
    const api = await startRouter({});
    try {
      const answer = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages: [user('hi')] });
      assert.equal(answer.status, 503);
      assert.equal(answer.json.error.code, 'upstream_not_configured');
      assert.equal(answer.json.error.type, 'api_error');
      const dry = await post(`${api.url}/v1/tools/rewrite`, { messages: [user('send an email')], tools: TOOLS });
      assert.equal(dry.status, 200);
      // The ten ranked tools, and the search tool the proxy answers itself.
      assert.equal(dry.json.request.tools.length, 11);
      assert.equal(dry.json.request.tools.at(-1).function.name, 'search_tools');
      assert.equal(dry.json.decision.searchTool, 'search_tools');
    } finally {
      await api.close();
    }
  });

  it('502s when the upstream cannot be reached', async () => {
    const port = await closedPort();
    const api = await startRouter({ upstreamLlmUrl: `http://127.0.0.1:${port}/v1` });
    try {
      const answer = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages: [user('hi')] });
      assert.equal(answer.status, 502);
      assert.equal(answer.json.error.code, 'upstream_unreachable');
      assert.equal(answer.json.error.type, 'api_error');
    } finally {
      await api.close();
    }
  });

  describe('with an upstream key and a short timeout', () => {
    let llm: StandInLlm;
    let api: RunningRouter;
    before(async () => {
      llm = await startStandInLlm();
      api = await startRouter({ upstreamLlmUrl: llm.url, chat: { timeoutMs: 500, upstreamKey: 'sk-upstream', searchRounds: 0 } });
    });
    after(async () => {
      await api.close();
      await llm.close();
    });
    beforeEach(() => llm.reset());

    it("replaces the caller's Authorization with the configured key", async () => {
      const answer = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages: [user('hi')] }, { authorization: 'Bearer sk-caller' });
      assert.equal(answer.status, 200);
      assert.equal(llm.received[0]!.headers.authorization, 'Bearer sk-upstream');
    });

    it('504s in OpenAI format when the upstream does not answer in time', { timeout: 15_000 }, async () => {
      llm.respond(() => {
        // Never answers.
      });
      const started = performance.now();
      const answer = await post(`${api.url}/v1/chat/completions`, { model: 'm', messages: [user('hi')] });
      assert.equal(answer.status, 504);
      assert.deepEqual(answer.json, {
        error: { message: 'The upstream LLM did not answer within 500 ms.', type: 'api_error', param: null, code: 'upstream_timeout' },
      });
      assert.ok(performance.now() - started < 3_000);
    });

    it('keeps a slow stream that keeps sending, and cuts one that stalls', { timeout: 15_000 }, async () => {
      llm.respond(async (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        // Ten chunks 100 ms apart: 1 s in all, twice the timeout, but never silent for 500 ms.
        for (let i = 0; i < 10; i++) {
          res.write(`data: {"n":${i}}\n\n`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        res.end('data: [DONE]\n\n');
      });
      const slow = await post(`${api.url}/v1/chat/completions`, { model: 'm', stream: true, messages: [user('hi')] });
      assert.equal(slow.status, 200);
      assert.match(slow.raw.toString(), /"n":9\}\n\ndata: \[DONE\]\n\n$/);

      llm.respond((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"n":0}\n\n');
        // ...and then silence.
      });
      const response = await fetch(`${api.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [user('hi')] }),
      });
      assert.equal(response.status, 200);
      await assert.rejects(response.text(), 'a stalled stream ends with a broken connection, not a clean end');
    });
  });
});

/** Fails with `message` unless `promise` settles within `ms`. */
async function within<T>(ms: number, promise: Promise<T>, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
