import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseJsonInSlices } from '../../src/http/json-slices.js';

const tools = Array.from({ length: 20_000 }, (_, i) => ({ name: `t${i}`, description: 'x,"]}[{\\'.repeat(10), nested: [i, { k: i }] }));
// A top-level object whose large arrays are cut into groups: one under "tools", one under a "__proto__" key.
const text = JSON.stringify({ a: 1, tools, z: [1, 2] }).replace('"z"', `"__proto__":${JSON.stringify(tools)},"z"`);

test('a large body parses in slices to what JSON.parse gives, "__proto__" kept as an own key', async () => {
  const parsed = await parseJsonInSlices(Buffer.from(text), 64);
  assert.deepEqual(parsed, JSON.parse(text));
  assert.equal(Object.getPrototypeOf(parsed), Object.prototype);
  assert.ok(Object.hasOwn(parsed as object, '__proto__'));
  const array = JSON.stringify(tools);
  assert.deepEqual(await parseJsonInSlices(Buffer.from(array), 64), JSON.parse(array));
});

test('malformed large bodies fail as body-parser fails them (entity.parse.failed), as JSON.parse would', async () => {
  const bad = [
    text.replace('}]', '},]'),
    text.slice(0, -3),
    text.replace('"t19999"', 't19999'),
    text.replace(',{"name":"t10000"', `,${' '.repeat(300_000)},{"name":"t10000"`),
  ];
  for (const body of bad) {
    assert.throws(() => JSON.parse(body));
    await assert.rejects(parseJsonInSlices(Buffer.from(body), 64), (error: { type?: string }) => error.type === 'entity.parse.failed');
  }
});

test('nesting deeper than the limit is refused before parsing', async () => {
  await assert.rejects(parseJsonInSlices(Buffer.from(text), 3), (error: { type?: string }) => error.type === 'entity.too.deep');
});
