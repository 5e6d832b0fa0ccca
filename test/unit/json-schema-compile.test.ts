import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileSchema } from '../../src/catalog/json-schema.js';

describe('compileSchema (call-time argument validation)', () => {
  it('lists every problem with its path', () => {
    const validate = compileSchema({
      type: 'object',
      properties: { n: { type: 'integer', minimum: 1 }, mode: { enum: ['fast', 'slow'] }, email: { type: 'string', format: 'email' } },
      required: ['n', 'mode'],
      additionalProperties: false,
    });
    assert.deepEqual(validate({ n: 1, mode: 'fast', email: 'a@b.example' }), []);
    assert.deepEqual(validate({ n: 0, email: 'nope', extra: true }).sort(), [
      "(root): must NOT have additional properties \"extra\"",
      "(root): must have required property 'mode'",
      '/email: must match format "email"',
      '/n: must be >= 1',
    ]);
    assert.deepEqual(validate({ n: 2, mode: 'medium' }), ['/mode: must be equal to one of the allowed values: "fast", "slow"']);
  });

  it('validates in the dialect the schema is written in', () => {
    // draft-04: boolean exclusiveMinimum.
    const draft04 = compileSchema({
      $schema: 'http://json-schema.org/draft-04/schema#',
      type: 'object',
      properties: { n: { type: 'number', minimum: 0, exclusiveMinimum: true } },
    });
    assert.deepEqual(draft04({ n: 0 }), ['/n: must be > 0']);
    assert.deepEqual(draft04({ n: 0.5 }), []);
    // 2020-12: prefixItems.
    const draft2020 = compileSchema({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }], items: false } },
    });
    assert.deepEqual(draft2020({ pair: ['a', 1] }), []);
    assert.equal(draft2020({ pair: [1, 'a'] }).length, 2);
    assert.equal(draft2020({ pair: ['a', 1, 2] }).length, 1);
  });

  it('caches by schema text, and tolerates two schemas with the same $id', () => {
    const first = compileSchema({ $id: 'https://example.com/args', type: 'object', required: ['a'] });
    assert.equal(compileSchema({ $id: 'https://example.com/args', type: 'object', required: ['a'] }), first);
    const other = compileSchema({ $id: 'https://example.com/args', type: 'object', required: ['b'] });
    assert.notEqual(other, first);
    assert.deepEqual(other({ b: 1 }), []);
    assert.deepEqual(first({ b: 1 }), ["(root): must have required property 'a'"]);
  });
});
