import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { limitBytes, readBodyBytes, releaseBodyBytes } from '../../src/http/body-bytes.js';

/** A request body as chunks; `complete` as Node sets it once the whole message arrived. */
function request(chunks: string[]): IncomingMessage {
  const stream = Readable.from(chunks.map((chunk) => Buffer.from(chunk)), { objectMode: false }) as unknown as IncomingMessage & { complete: boolean };
  stream.complete = false;
  stream.once('end', () => (stream.complete = true));
  return stream;
}

test('the chunks of a body of the declared length end up in one buffer', async () => {
  const bytes = await readBodyBytes(request(['{"to', 'ols":', '[]}']), 12, 1000);
  assert.equal(bytes.toString(), '{"tools":[]}');
});

test('a declared length over the limit is refused as body-parser refuses it, before reading', async () => {
  await assert.rejects(readBodyBytes(request(['x']), 2000, 1000), { status: 413, type: 'entity.too.large' });
});

test('a body longer or shorter than declared is refused', async () => {
  await assert.rejects(readBodyBytes(request(['abc', 'def']), 4, 1000), { status: 400, type: 'request.size.invalid' });
  await assert.rejects(readBodyBytes(request(['abc']), 4, 1000), { status: 400, type: 'request.size.invalid' });
});

test('limits read as body-parser reads them', () => {
  assert.equal(limitBytes('20mb'), 20 << 20);
  assert.equal(limitBytes('1gb'), 1 << 30);
  assert.equal(limitBytes('1.5kb'), 1536);
  assert.equal(limitBytes('1000'), 1000);
  assert.ok(Number.isNaN(limitBytes('lots')));
});

test('a body buffer is freed once released; a slice of shared memory is left alone', () => {
  const body = Buffer.alloc(1 << 20, 1);
  releaseBodyBytes(body);
  assert.equal(body.length, 0);
  const shared = Buffer.from('{"a":1}');
  releaseBodyBytes(shared);
  assert.equal(shared.toString(), '{"a":1}');
});
