import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import express from 'express';
import type { Tool } from '../../../src/catalog/types.js';
import { ToolrouterError } from '../../../src/errors.js';
import { invalidRequest } from '../../../src/chat/core/errors.js';
import { conversationQuery } from '../../../src/chat/core/query.js';
import { answerText, searchToolDefinition } from '../../../src/chat/core/search-tool.js';
import { StickySelections } from '../../../src/chat/core/sticky.js';
import { MemoryConversationStore } from '../../../src/state/conversations.js';
import type { Api } from '../../../src/chat/core/tool-request.js';
import { DIALECTS } from '../../../src/chat/routes.js';
import { message, messageEvents, toolUse } from '../../helpers/stand-in-anthropic.js';
import { completion, functionCallEvents, functionCallResponse, responseObject, responsesEventStream, textChunks, toolCallChunks, toolCallCompletion } from '../../helpers/stand-in-llm.js';

/**
 * One contract, every dialect (src/chat/routes.ts DIALECTS): a request parses, the search tool is a tool of the
 * request's own API, the upstream's search turn is read (JSON and SSE, cut anywhere), and the continuation the proxy
 * sends next is a valid request of that API which continues the same conversation. Only the wire formats differ, and
 * they come from the stand-in upstreams the proxy tests use.
 */

interface Fixture {
  /** A first request: one user turn asking `text`, with `tools`. */
  body(text: string, tools: readonly object[]): Record<string, unknown>;
  /** The upstream's answer calling tool `name` once, whole (JSON) and as its SSE events. */
  callJson(callId: string, name: string, args: unknown): unknown;
  callEvents(callId: string, name: string, args: unknown): string[];
  /** A text answer, whole and streamed. */
  textJson(text: string): unknown;
  textEvents(text: string): string;
}

const FIXTURES: Record<Api, Fixture> = {
  chat: {
    body: (text, tools) => ({ model: 'stand-in', messages: [{ role: 'user', content: text }], tools }),
    callJson: toolCallCompletion,
    callEvents: toolCallChunks,
    textJson: completion,
    textEvents: (text) => textChunks(text).join(''),
  },
  responses: {
    body: (text, tools) => ({ model: 'stand-in', input: text, tools }),
    callJson: (callId, name, args) => functionCallResponse(callId, name, args),
    callEvents: (callId, name, args) => functionCallEvents(callId, name, args),
    textJson: responseObject,
    textEvents: responsesEventStream,
  },
  anthropic: {
    body: (text, tools) => ({ model: 'claude-standin', max_tokens: 100, messages: [{ role: 'user', content: text }], tools }),
    callJson: (callId, name, args) => message([toolUse(callId, name, args)]),
    callEvents: (callId, name, args) => messageEvents(message([toolUse(callId, name, args)])),
    textJson: message,
    textEvents: (text) => messageEvents(message(text)).join(''),
  },
};

const CATALOG_TOOLS: Tool[] = [
  { name: 'weather__forecast', description: 'Weather forecast for a city', inputSchema: { type: 'object', properties: { city: { type: 'string', description: 'City name' } } } },
  { name: 'mail__send', title: 'Send an email', inputSchema: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] } },
];

const SEARCH = 'search_tools';
const reply = (type: string) => new Response('', { headers: { 'content-type': type } });
const bytewise = (text: string) => [...Buffer.from(text, 'utf8')].map((byte) => Uint8Array.of(byte));

describe('every chat dialect keeps the same contract', () => {
  it('DIALECTS holds one dialect per API, each on its own route', () => {
    assert.deepEqual(Object.keys(DIALECTS).sort(), ['anthropic', 'chat', 'responses']);
    for (const [api, dialect] of Object.entries(DIALECTS)) assert.equal(dialect.api, api);
    assert.equal(new Set(Object.values(DIALECTS).map((dialect) => dialect.path)).size, 3);
  });

  for (const [api, dialect] of Object.entries(DIALECTS) as [Api, (typeof DIALECTS)[Api]][]) {
    const fixture = FIXTURES[api];

    describe(api, () => {
      const tools = CATALOG_TOOLS.map((tool) => dialect.renderTool(tool));
      const body = fixture.body('What is the weather in Lisbon?', tools);

      it('parses a request whose tools are catalog tools rendered in its format', () => {
        const request = dialect.parse(body);
        assert.equal(request.api, api);
        assert.deepEqual(
          request.tools.map((tool) => [tool.function?.name, tool.function?.parameters]),
          CATALOG_TOOLS.map((tool) => [tool.name, tool.inputSchema]),
        );
        assert.equal(request.tools[1]!.function!.description, 'Send an email', 'a title stands in for a missing description');
        assert.match(conversationQuery(request.turns, 1_000), /weather in Lisbon/);
        assert.deepEqual(
          dialect.conversationSteps(request).map((step) => [step.role, step.text]),
          [['user', 'What is the weather in Lisbon?']],
        );
      });

      it('refuses a malformed request with an invalid_request naming the field', () => {
        const bad = { ...body, tools: [{ ...(tools[0] as Record<string, unknown>), ...(api === 'chat' ? { function: { name: 'bad name!' } } : { name: 'bad name!' }) }] };
        assert.throws(
          () => dialect.parse(bad),
          (error: unknown) => error instanceof ToolrouterError && error.code === 'invalid_request' && error.status === 400 && /^tools\[0\]/.test(error.param ?? ''),
        );
      });

      it("offers the search tool as a function tool of the request's own API", () => {
        const request = dialect.parse(body);
        const definition = searchToolDefinition(dialect, SEARCH, request.tools);
        const withSearch = dialect.parse({ ...body, tools: [...tools, definition] });
        const search = withSearch.tools.at(-1)!;
        assert.equal(search.function?.name, SEARCH);
        assert.deepEqual((search.function?.parameters as { required?: unknown }).required, ['query']);
        assert.match(String(search.function?.description), /Searches 2 tools of 2 servers/);
      });

      it('reads a search turn, JSON or streamed one byte at a time, and passes any other answer on', () => {
        const args = { query: 'weather forecast' };
        const json = dialect.searchTurnReader(SEARCH, reply('application/json'))!;
        json.push(new TextEncoder().encode(JSON.stringify(fixture.callJson('call_1', SEARCH, args))));
        const fromJson = json.finish();
        const streamed = dialect.searchTurnReader(SEARCH, reply('text/event-stream'))!;
        const verdicts = bytewise(fixture.callEvents('call_1', SEARCH, args).join('')).map((chunk) => streamed.push(chunk));
        assert.ok(verdicts.every((verdict) => verdict === 'hold'), 'a search turn is held to its end');
        const fromStream = streamed.finish();
        for (const turn of [fromJson, fromStream]) {
          assert.deepEqual(turn?.calls, [{ callId: 'call_1', arguments: JSON.stringify(args) }]);
          assert.deepEqual(turn?.allCallIds, ['call_1']);
        }
        assert.deepEqual(fromStream?.items, fromJson?.items, 'streamed and JSON turns go back into the conversation alike');

        const text = dialect.searchTurnReader(SEARCH, reply('text/event-stream'))!;
        assert.ok(bytewise(fixture.textEvents('It is sunny')).map((chunk) => text.push(chunk)).includes('pass'), 'a text answer goes to the caller');
        const other = dialect.searchTurnReader(SEARCH, reply('application/json'))!;
        other.push(new TextEncoder().encode(JSON.stringify(fixture.callJson('call_2', 'weather__forecast', { city: 'Lisbon' }))));
        assert.equal(other.finish(), undefined, 'a call of another tool is not a search');
        assert.equal(dialect.searchTurnReader(SEARCH, reply('text/plain')), undefined);
      });

      it('continues the conversation with the turn and its answer, as the same conversation', async () => {
        const request = dialect.parse(body);
        const sent = { ...body, tools: [...tools, searchToolDefinition(dialect, SEARCH, request.tools)] };
        const upstreamTurn = fixture.callJson('call_1', SEARCH, { query: 'weather forecast' });
        const reader = dialect.searchTurnReader(SEARCH, reply('application/json'))!;
        reader.push(new TextEncoder().encode(JSON.stringify(upstreamTurn)));
        const turn = reader.finish()!;
        const found = JSON.stringify({ tools: [{ name: 'weather__forecast' }], note: 'These tools are now available: call them directly.' });
        const next = dialect.parse(dialect.continuation(sent, turn, new Map([['call_1', found]])));

        assert.equal(next.history.length, request.history.length + 2, 'the turn and its answer are appended');
        assert.deepEqual(next.toolUse, { called: [SEARCH], results: [SEARCH] }, 'the search call and its result are in the conversation');
        const steps = dialect.conversationSteps(next);
        assert.ok(steps.some((step) => step.calls.some((call) => call.id === 'call_1' && call.name === SEARCH)));
        assert.ok(JSON.stringify(next.body).includes(JSON.stringify(answerText(found)).slice(1, -1)), 'the answer is what the model reads');

        // Sticky selection: the upstream's reply, read as the proxy passes it on, is the answer the next request carries.
        const sticky = new StickySelections(new MemoryConversationStore({ selections: 10 }));
        const answer = dialect.answers.reader(reply('application/json'))!;
        answer.push(new TextEncoder().encode(JSON.stringify(upstreamTurn)));
        await sticky.set(sticky.keys(request, dialect.answers, undefined), ['weather__forecast'], answer.finish());
        assert.deepEqual(await sticky.get(sticky.keys(next, dialect.answers, undefined)), ['weather__forecast']);
        assert.deepEqual(await sticky.get(sticky.keys(next, dialect.answers, 'key_other')), [], 'another key does not continue it');
      });

      it("reads a text answer's fingerprint alike from a JSON and a streamed reply", () => {
        const read = (type: string, text: string) => {
          const reader = dialect.answers.reader(reply(type))!;
          for (const chunk of bytewise(text)) reader.push(chunk);
          return reader.finish();
        };
        const json = read('application/json', JSON.stringify(fixture.textJson('Sunny in Lisbon')));
        assert.ok(json !== undefined);
        assert.equal(read('text/event-stream', fixture.textEvents('Sunny in Lisbon')), json);
      });

      it('answers errors in its own shape: the status, the message and the field at fault', async () => {
        const app = express();
        app.get('/invalid', () => {
          throw invalidRequest('Invalid request: tools[0].name: bad', 'tools[0].name', 'invalid_value');
        });
        app.get('/unconfigured', () => {
          throw new ToolrouterError('upstream_not_configured', 'No upstream is configured.');
        });
        app.use(dialect.errorHandler({ error: () => undefined } as never));
        const server = app.listen(0);
        try {
          const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
          const invalid = await fetch(`${base}/invalid`);
          assert.equal(invalid.status, 400);
          const text = await invalid.text();
          assert.match(text, /Invalid request: tools\[0\]\.name: bad/);
          assert.match(text, /invalid_request_error/);
          const unconfigured = await fetch(`${base}/unconfigured`);
          assert.equal(unconfigured.status, 503);
          assert.equal(unconfigured.headers.get('retry-after'), '1');
          assert.match(await unconfigured.text(), /No upstream is configured\./);
        } finally {
          server.close();
        }
      });
    });
  }
});
