import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MessageCutter, responseId } from '../../src/mcp/upstream/bounds.js';

/** Feeds `text` in chunks of `size` bytes and returns what passed, as one string. */
function run(cutter: MessageCutter, text: string, size: number): string {
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  for (let start = 0; start < bytes.length; start += size) out.push(...cutter.push(bytes.subarray(start, start + size)));
  out.push(...cutter.end());
  return Buffer.concat(out).toString('utf8');
}

describe('result bound: the message cutter', () => {
  it('passes messages within the limit unchanged, whatever the chunking (lines, SSE with LF and CRLF)', () => {
    const lines = '{"jsonrpc":"2.0","id":1,"result":{}}\n{"jsonrpc":"2.0","method":"x"}\n';
    const sse = 'event: message\ndata: {"id":1}\n\nevent: message\r\ndata: {"id":2}\r\n\r\n';
    for (const size of [1, 3, 7, 1000]) {
      assert.equal(run(new MessageCutter(100, 'line'), lines, size), lines, `line, chunks of ${size}`);
      assert.equal(run(new MessageCutter(100, 'sse'), sse, size), sse, `sse, chunks of ${size}`);
    }
  });

  it('replaces an oversized response by an error for its id, and keeps what follows', () => {
    const big = `{"result":{"content":[{"type":"text","text":"${'x'.repeat(5_000)}"}]},"jsonrpc":"2.0","id":42}`;
    const refused: [number, unknown][] = [];
    const out = run(new MessageCutter(1_000, 'line', (bytes, id) => refused.push([bytes, id])), `${big}\n{"jsonrpc":"2.0","id":43,"result":{}}\n`, 256);
    const [first, second] = out.trim().split('\n').map((line) => JSON.parse(line));
    assert.equal(first.id, 42);
    assert.equal(first.error.code, -32050);
    assert.match(first.error.message, new RegExp(`result too large: ${big.length + 1} bytes is more than mcp.maxResultBytes \\(1000\\)`));
    assert.deepEqual(second, { jsonrpc: '2.0', id: 43, result: {} });
    assert.deepEqual(refused, [[big.length + 1, 42]]);
  });

  it('in an SSE stream, an oversized event becomes one error event', () => {
    const event = `event: message\ndata: {"jsonrpc":"2.0","id":"a-1","result":{"text":"${'y'.repeat(3_000)}"}}\n\n`;
    const out = run(new MessageCutter(500, 'sse'), event, 100);
    assert.match(out, /^event: message\ndata: \{"jsonrpc":"2\.0","id":"a-1","error":\{"code":-32050/);
    assert.ok(out.endsWith('\n\n'));
  });

  it('finds the id of a response at either end, and none for a request', () => {
    assert.equal(responseId('{"jsonrpc":"2.0","id":7,"result":{"x', 'y"}}'), 7);
    assert.equal(responseId('{"result":{"content":[{"id":99', '"jsonrpc":"2.0","id":"k"}'), 'k');
    assert.equal(responseId('{"method":"sampling/createMessage","params":', '"jsonrpc":"2.0","id":3}'), undefined);
    // A nested "id" at the end of the result is not the response's.
    assert.equal(responseId('{"result":{"items":[', '{"id":5}]}}'), undefined);
  });
});
