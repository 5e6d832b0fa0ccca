import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateTools } from '../../src/catalog/validate.js';
import { upstreamUrl } from '../../src/chat/core/proxy.js';
import { anthropicDialect } from '../../src/chat/anthropic/dialect.js';
import { chatDialect } from '../../src/chat/openai-chat/dialect.js';

const chatCompletionsUrl = (base: string, incomingUrl: string) => upstreamUrl(base, chatDialect.upstream.route, incomingUrl);
import { contentText, conversationQuery } from '../../src/chat/core/query.js';
import { parseChatRequest } from '../../src/chat/openai-chat/request.js';
import { parseAnthropicRequest } from '../../src/chat/anthropic/request.js';
import { anthropicSteps } from '../../src/chat/anthropic/request.js';
import { capKept, requiredTools, selectRequestTools, stickyOrder, type KeptTool } from '../../src/chat/core/select.js';
import { searchToolName } from '../../src/chat/core/search-tool.js';
import { StickySelections } from '../../src/chat/core/sticky.js';
import { MemoryConversationStore } from '../../src/state/conversations.js';
import { chatShape } from '../../src/chat/openai-chat/answers.js';
import { responsesShape } from '../../src/chat/openai-responses/answers.js';
import { parseResponsesRequest } from '../../src/chat/openai-responses/request.js';
import { indexableTool } from '../../src/chat/core/tools.js';
import { openAiFunctionTool } from '../../src/chat/openai/tools.js';

const user = (content: unknown) => ({ role: 'user', content });
const fn = (name: string) => ({ type: 'function', function: { name, parameters: { type: 'object' } } });

describe('conversationQuery', () => {
  it('weights the last user turn and adds the two before it, newest first', () => {
    const messages = parseChatRequest({
      messages: [
        { role: 'system', content: 'You are terse.' },
        user('first turn'),
        user('second turn'),
        { role: 'assistant', content: 'answer' },
        user('third turn'),
        user('fourth turn'),
      ],
    }).messages;
    assert.equal(conversationQuery(messages, 2_000), 'fourth turn\nfourth turn\nthird turn\nsecond turn');
  });

  it('reads text parts of array content and skips the rest', () => {
    assert.equal(
      contentText([{ type: 'text', text: 'look at' }, { type: 'image_url', image_url: { url: 'x' } }, null, { type: 'text', text: ' this\n chart' }]),
      'look at this chart',
    );
    assert.equal(contentText(null), '');
  });

  it('falls back to the system prompt when no user text exists, and is empty when there is nothing at all', () => {
    const withSystem = parseChatRequest({ messages: [{ role: 'developer', content: 'Manage the calendar.' }, user([{ type: 'image_url' }])] });
    assert.equal(conversationQuery(withSystem.messages, 2_000), 'Manage the calendar.\nManage the calendar.');
    assert.equal(conversationQuery(parseChatRequest({ messages: [{ role: 'assistant', content: 'hi' }] }).messages, 2_000), '');
  });

  it('stays within the length budget, keeping the start and end of a long turn', () => {
    const long = `START ${'filler '.repeat(2_000)} END`;
    const query = conversationQuery([{ role: 'user', content: 'older' }, { role: 'user', content: long }], 400);
    assert.ok(query.length <= 400, `${query.length}`);
    assert.match(query, /^START .* END\nSTART .* END\nolder$/s);
  });

  it('never turns a user message into a select: query', () => {
    assert.ok(!conversationQuery([user('select:fs__delete_file please')], 2_000).toLowerCase().startsWith('select:'));
  });
});

describe('keep-rules', () => {
  it('names tool_choice, tool-result, called and pinned tools, strongest reason first', () => {
    const request = parseChatRequest({
      messages: [
        user('hi'),
        { role: 'assistant', tool_calls: [{ id: 'a', function: { name: 'one' } }, { id: 'b', type: 'custom', custom: { name: 'two' } }] },
        { role: 'tool', tool_call_id: 'a', content: 'x' },
        { role: 'tool', tool_call_id: 'unknown', content: 'y' },
        { role: 'assistant', function_call: { name: 'legacy', arguments: '{}' } },
        { role: 'function', name: 'legacy_result', content: 'z' },
      ],
      tool_choice: { type: 'function', function: { name: 'two' } },
    });
    assert.deepEqual(
      [...requiredTools(request, ['pinned', 'one'])],
      [
        ['two', 'tool_choice'],
        ['one', 'tool_result'],
        ['legacy_result', 'tool_result'],
        ['legacy', 'called'],
        ['pinned', 'pinned'],
      ],
    );
  });

  it('keeps rule-kept and ranked tools in request order and drops the rest', () => {
    const request = parseChatRequest({ messages: [user('x')], tools: [fn('a'), fn('b'), { type: 'custom', custom: { name: 'c' } }, fn('d'), fn('e')] });
    const selection = selectRequestTools(request.tools, new Map([['d', 'called' as const]]), [{ name: 'e', score: 0.9 }]);
    assert.deepEqual(selection.keep, [false, false, true, true, true]);
    assert.deepEqual(selection.kept, [
      { name: 'c', reason: 'not_a_function', source: 'request' },
      { name: 'd', reason: 'called', source: 'request' },
      { name: 'e', reason: 'ranked', score: 0.9, source: 'request' },
    ]);
    assert.deepEqual(selection.dropped, [
      { name: 'a', reason: 'below_top_k' },
      { name: 'b', reason: 'below_top_k' },
    ]);
  });
});

describe('tool conversions', () => {
  it('indexes what search reads and passes catalog validation whatever the parameter schema says', () => {
    const tool = indexableTool({
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'strng', description: 'City name' }, days: { type: 7 } }, required: 'city' },
    });
    assert.deepEqual(tool, {
      name: 'get_weather',
      description: 'Weather for a city',
      inputSchema: { type: 'object', properties: { city: { description: 'City name' }, days: {} } },
    });
    assert.doesNotThrow(() => validateTools([tool, indexableTool({ name: 'no_params' })]));
  });

  it('turns a catalog tool into an OpenAI function with its input schema as parameters', () => {
    const inputSchema = { type: 'object' as const, properties: { q: { type: 'string' } } };
    assert.deepEqual(openAiFunctionTool({ name: 'web__search', title: 'Search', inputSchema }), {
      type: 'function',
      function: { name: 'web__search', description: 'Search', parameters: inputSchema },
    });
  });
});

describe('chatCompletionsUrl', () => {
  it('appends /chat/completions to a base URL and keeps the caller query string', () => {
    assert.equal(chatCompletionsUrl('https://api.example.com/v1', '/v1/chat/completions'), 'https://api.example.com/v1/chat/completions');
    assert.equal(chatCompletionsUrl('https://api.example.com/v1/', '/v1/chat/completions'), 'https://api.example.com/v1/chat/completions');
    assert.equal(
      chatCompletionsUrl('https://x.openai.azure.com/openai/deployments/gpt/chat/completions', '/v1/chat/completions?api-version=2024-10-21'),
      'https://x.openai.azure.com/openai/deployments/gpt/chat/completions?api-version=2024-10-21',
    );
  });
});

describe('maxTools cap', () => {
  const kept = (name: string, reason: KeptTool['reason'], score?: number): KeptTool => ({ name, reason, source: 'request', ...(score === undefined ? {} : { score }) });

  it('drops the weakest reasons first, lower scores before higher, and keeps the order of what stays', () => {
    const list = [kept('a', 'ranked', 0.9), kept('b', 'tool_choice'), kept('c', 'ranked', 0.2), kept('d', 'sticky'), kept('e', 'called'), kept('f', 'ranked', 0.5)];
    const { keep, dropped } = capKept(list, 4);
    assert.deepEqual(list.filter((_tool, i) => keep[i]).map((tool) => tool.name), ['a', 'b', 'd', 'e']);
    assert.deepEqual(dropped, [{ name: 'f', reason: 'over_max_tools' }, { name: 'c', reason: 'over_max_tools' }]);
    assert.deepEqual(capKept(list, 6).dropped, []);
    // Keep-rules alone over the cap: tool_choice outlasts everything.
    const rules = [kept('x', 'pinned'), kept('y', 'tool_choice'), kept('z', 'tool_result')];
    assert.deepEqual(capKept(rules, 1).keep, [false, true, false]);
  });
});

describe('sticky selection', () => {
  it("puts the earlier turn's tools first in their order and appends the rest in request order", async () => {
    const items = ['a', 'b', 'c', 'd', 'e'].map((name) => ({ name }));
    assert.deepEqual(stickyOrder(items, (item) => item.name, ['d', 'gone', 'b']).map((item) => item.name), ['d', 'b', 'a', 'c', 'e']);
  });

  const fingerprint = (content: string) => chatShape.answerAt([{ role: 'assistant', content }], 0);

  it('recognises a later turn by its history prefix followed by the answer it got, per key and API', async () => {
    const sticky = new StickySelections(new MemoryConversationStore({ selections: 10 }));
    const turn1 = parseChatRequest({ messages: [user('email Bob')] });
    await sticky.set(sticky.keys(turn1, chatShape, undefined), ['gmail'], fingerprint('sent'));
    const turn2 = parseChatRequest({ messages: [user('email Bob'), { role: 'assistant', content: 'sent' }, user('and the weather?')] });
    assert.deepEqual(await sticky.get(sticky.keys(turn2, chatShape, undefined)), ['gmail']);
    assert.deepEqual(await sticky.get(sticky.keys(turn2, chatShape, 'key_other')), [], 'another key does not share it');
    const forged = parseChatRequest({ messages: [user('email Bob'), { role: 'assistant', content: 'something else' }, user('and the weather?')] });
    assert.deepEqual(await sticky.get(sticky.keys(forged, chatShape, undefined)), [], 'an answer the upstream never gave continues nothing');
    assert.deepEqual(await sticky.get(sticky.keys(parseChatRequest({ messages: [user('email Alice')] }), chatShape, undefined)), []);
  });

  it('a new conversation with the same first words starts clean', async () => {
    const sticky = new StickySelections(new MemoryConversationStore({ selections: 10 }));
    const hi = () => parseChatRequest({ messages: [user('hi')] });
    await sticky.set(sticky.keys(hi(), chatShape, undefined), ['a'], fingerprint('Hello!'));
    assert.deepEqual(await sticky.get(sticky.keys(hi(), chatShape, undefined)), []);
    await sticky.set(sticky.keys(hi(), chatShape, undefined), ['a', 'b'], fingerprint('Hi there'));
    assert.deepEqual(await sticky.get(sticky.keys(hi(), chatShape, undefined)), []);
    // Each answer to the same opening is its own conversation.
    const continued = (answer: string) => parseChatRequest({ messages: [user('hi'), { role: 'assistant', content: answer }, user('more')] });
    assert.deepEqual(await sticky.get(sticky.keys(continued('Hello!'), chatShape, undefined)), ['a']);
    assert.deepEqual(await sticky.get(sticky.keys(continued('Hi  there'), chatShape, undefined)), ['a', 'b'], 'whitespace does not matter');
  });

  it('matches a tool-call answer by its call ids, and a Responses continuation by previous_response_id', async () => {
    const sticky = new StickySelections(new MemoryConversationStore({ selections: 10 }));
    const calls = [{ id: 'call_1', type: 'function', function: { name: 'gmail', arguments: '{}' } }];
    await sticky.set(sticky.keys(parseChatRequest({ messages: [user('email Bob')] }), chatShape, undefined), ['gmail'], chatShape.answerAt([{ role: 'assistant', content: null, tool_calls: calls }], 0));
    const next = parseChatRequest({ messages: [user('email Bob'), { role: 'assistant', tool_calls: calls }, { role: 'tool', tool_call_id: 'call_1', content: 'ok' }] });
    assert.deepEqual(await sticky.get(sticky.keys(next, chatShape, undefined)), ['gmail']);

    const first = parseResponsesRequest({ input: 'email Bob' });
    await sticky.set(sticky.keys(first, responsesShape, undefined), ['gmail', 'weather'], undefined, 'resp_1');
    const byId = parseResponsesRequest({ input: 'something else', previous_response_id: 'resp_1' });
    assert.deepEqual(await sticky.get(sticky.keys(byId, responsesShape, undefined)), ['gmail', 'weather']);
    assert.deepEqual(await sticky.get(sticky.keys(byId, responsesShape, 'key_other')), []);
    assert.deepEqual(await sticky.get(sticky.keys(parseResponsesRequest({ input: 'email Bob' }), responsesShape, undefined)), []);
  });

  it('forgets the least recently used conversation beyond its size', async () => {
    const sticky = new StickySelections(new MemoryConversationStore({ selections: 2 }));
    const keys = ['one', 'two', 'three'].map((text) => sticky.keys(parseChatRequest({ messages: [user(text)] }), chatShape, undefined));
    for (const [i, key] of keys.entries()) await sticky.set(key, [`tool${i}`], fingerprint('ok'));
    const next = (text: string) => sticky.keys(parseChatRequest({ messages: [user(text), { role: 'assistant', content: 'ok' }, user('go on')] }), chatShape, undefined);
    assert.deepEqual(await sticky.get(next('one')), []);
    assert.deepEqual(await sticky.get(next('three')), ['tool2']);
  });
});

describe('search tool name', () => {
  it('is the configured one unless the request already has a tool of that name', () => {
    const request = parseChatRequest({ messages: [user('x')], tools: [fn('search_tools'), fn('search_tools_2'), fn('other')] });
    assert.equal(searchToolName(request.tools, 'find_tools'), 'find_tools');
    assert.equal(searchToolName(request.tools, 'search_tools'), 'search_tools_3');
  });
});

describe('Anthropic requests', () => {
  it('reads keep-rules and the conversation from content blocks', () => {
    const request = parseAnthropicRequest({
      model: 'claude',
      max_tokens: 10,
      system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
      messages: [
        user('Will it rain in Paris?'),
        { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_1', name: 'weather', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'rain' }, { type: 'text', text: 'And Lisbon?' }] },
      ],
      tools: [{ name: 'weather', input_schema: { type: 'object' } }, { name: 'mail', description: 'Send mail', input_schema: { type: 'object' } }, { type: 'web_search_20250305', name: 'web_search' }],
      tool_choice: { type: 'tool', name: 'mail' },
    });
    assert.deepEqual(request.tools.map((tool) => tool.function?.name ?? null), ['weather', 'mail', null], 'a typed tool is not ranked');
    assert.deepEqual([...requiredTools(request, []).entries()], [['mail', 'tool_choice'], ['weather', 'tool_result']]);
    assert.equal(conversationQuery(request.turns, 1_000).split('\n')[0], 'And Lisbon?');
    assert.equal(request.history.length, 4, 'the system prompt is part of the history');
    const steps = anthropicSteps(request);
    assert.deepEqual(steps.map((step) => step.role), ['system', 'user', 'assistant', 'user']);
    assert.deepEqual(steps[2]!.calls, [{ id: 'toolu_1', name: 'weather' }]);
    assert.equal(steps[3]!.ref, 'toolu_1');
  });

  it("keeps the tools a caller's own tool search referenced (tool_reference blocks in a tool_result)", () => {
    const request = parseAnthropicRequest({
      messages: [
        user('find the deploy tool'),
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_s', name: 'ToolSearch', input: { query: 'deploy' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_s', content: [{ type: 'tool_reference', tool_name: 'deploy' }] }] },
      ],
      tools: [{ name: 'ToolSearch', input_schema: { type: 'object' } }, { name: 'deploy', input_schema: { type: 'object' }, defer_loading: true }],
    });
    assert.deepEqual([...requiredTools(request, []).entries()], [['ToolSearch', 'tool_result'], ['deploy', 'tool_result']]);
  });

  it("goes to the caller's own path under the Anthropic base URL, with or without /v1 in it", () => {
    assert.equal(upstreamUrl('https://api.anthropic.com', anthropicDialect.upstream.route, '/v1/messages?beta=true'), 'https://api.anthropic.com/v1/messages?beta=true');
    assert.equal(upstreamUrl('https://gateway.example/anthropic/v1/', anthropicDialect.upstream.route, '/v1/messages/count_tokens'), 'https://gateway.example/anthropic/v1/messages/count_tokens');
  });

  it('refuses a custom tool without an input_schema, naming it', () => {
    assert.throws(() => parseAnthropicRequest({ messages: [user('hi')], tools: [{ name: 'x' }] }), /tools\[0\]\.input_schema/);
  });
});
