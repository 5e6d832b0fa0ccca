import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConversationShape } from '../../src/chat/core/answers.js';
import { anthropicShape } from '../../src/chat/anthropic/answers.js';
import { anthropicSearchTurnReader } from '../../src/chat/anthropic/search-turn.js';
import { chatShape } from '../../src/chat/openai-chat/answers.js';
import { chatSearchTurnReader } from '../../src/chat/openai-chat/search-turn.js';
import { responsesShape } from '../../src/chat/openai-responses/answers.js';
import { SseJsonReader, type JsonEvent } from '../../src/chat/core/sse.js';
import { message, messageEvents, toolUse } from '../helpers/stand-in-anthropic.js';
import { completion, responseObject, responsesEventStream, textChunks, toolCallChunks, toolCallCompletion } from '../helpers/stand-in-llm.js';

const sseReply = () => new Response('', { headers: { 'content-type': 'text/event-stream' } });
const jsonReply = () => new Response('', { headers: { 'content-type': 'application/json' } });

/** Every byte its own chunk: events, lines and multi-byte characters all cut at every possible place. */
function bytewise(text: string): Uint8Array[] {
  return [...Buffer.from(text, 'utf8')].map((byte) => Uint8Array.of(byte));
}

function readAll(shape: ConversationShape, reply: Response, text: string): string | undefined {
  const reader = shape.reader(reply)!;
  for (const chunk of bytewise(text)) reader.push(chunk);
  return reader.finish();
}

describe('SSE reading (eventsource-parser), one byte at a time', () => {
  it('yields each JSON event whole, with its name, across CRLF and multi-byte characters; skips [DONE] and non-JSON', () => {
    const events: JsonEvent[] = [];
    const reader = new SseJsonReader((event) => events.push(event));
    const text = 'event: a\r\ndata: {"text":"Grüße 👋"}\r\n\r\n: comment\n\ndata: not json\n\ndata: {"n":\ndata: 1}\n\ndata: [DONE]\n\n';
    for (const chunk of bytewise(text)) reader.push(chunk);
    assert.deepEqual(events, [{ event: 'a', data: { text: 'Grüße 👋' } }, { data: { n: 1 } }]);
  });

  it('reads the same answer from a streamed reply, a JSON reply and the history that carries it back (chat)', () => {
    const streamed = readAll(chatShape, sseReply(), textChunks('Hello  there, Grüße 👋').join(''));
    const json = readAll(chatShape, jsonReply(), JSON.stringify(completion('Hello there, Grüße 👋')));
    assert.ok(streamed !== undefined);
    assert.equal(streamed, json);
    assert.equal(streamed, chatShape.answerAt([{ role: 'assistant', content: 'Hello there, Grüße 👋' }], 0));
    assert.notEqual(streamed, chatShape.answerAt([{ role: 'assistant', content: 'Hello there' }], 0));

    const calls = readAll(chatShape, sseReply(), toolCallChunks('call_1', 'gmail', { to: 'bob' }).join(''));
    assert.equal(calls, readAll(chatShape, jsonReply(), JSON.stringify(toolCallCompletion('call_1', 'gmail', { to: 'bob' }))));
    assert.equal(calls, chatShape.answerAt([{ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'gmail', arguments: '{}' } }] }], 0));
  });

  it('Responses and Anthropic: streamed, JSON and history agree', () => {
    const streamed = readAll(responsesShape, sseReply(), responsesEventStream('Sunny in Lisbon'));
    assert.equal(streamed, readAll(responsesShape, jsonReply(), JSON.stringify(responseObject('Sunny in Lisbon'))));
    const history = [{ role: 'user', content: 'hi' }, ...(responseObject('Sunny in Lisbon').output as unknown[]), { role: 'user', content: 'more' }];
    assert.equal(streamed, responsesShape.answerAt(history, 1));
    assert.equal(responsesShape.answerAt(history, 2), undefined, 'an answer starts where the output of the model starts');

    const full = message([{ type: 'text', text: 'Let me check.' }, toolUse('toolu_1', 'weather', { city: 'Lisbon' })]);
    const anthropic = readAll(anthropicShape, sseReply(), messageEvents(full).join(''));
    assert.ok(anthropic !== undefined);
    assert.equal(anthropic, readAll(anthropicShape, jsonReply(), JSON.stringify(full)));
    assert.equal(anthropic, anthropicShape.answerAt([{ role: 'assistant', content: full.content }], 0));
    const text = message('Two words.');
    assert.equal(readAll(anthropicShape, sseReply(), messageEvents(text).join('')), anthropicShape.answerAt([{ role: 'assistant', content: 'Two words.' }], 0));
  });

  it('rebuilds a streamed Anthropic search turn whole, its tool input from JSON deltas', () => {
    const full = message([{ type: 'text', text: 'Looking for a tool.' }, toolUse('toolu_s', 'search_tools', { query: 'weather in Lisbon' })]);
    const reader = anthropicSearchTurnReader('search_tools', sseReply())!;
    for (const chunk of bytewise(messageEvents(full).join(''))) reader.push(chunk);
    const turn = reader.finish();
    assert.deepEqual(turn?.calls, [{ callId: 'toolu_s', arguments: JSON.stringify({ query: 'weather in Lisbon' }) }]);
    assert.deepEqual(turn?.items, [{ role: 'assistant', content: full.content }]);
  });

  it('passes a streamed turn as soon as it shows it is not a search, however it is cut', () => {
    const reader = chatSearchTurnReader('search_tools', sseReply())!;
    const verdicts = bytewise(textChunks('Hi there').join('')).map((chunk) => reader.push(chunk));
    assert.ok(verdicts.includes('pass'));
    const searching = chatSearchTurnReader('search_tools', sseReply())!;
    assert.ok(bytewise(toolCallChunks('c', 'search_tools', { query: 'x' }).join('')).every((chunk) => searching.push(chunk) === 'hold'));
    assert.equal(searching.finish()?.calls[0]?.callId, 'c');
  });
});
