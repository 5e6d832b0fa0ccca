import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ajvLinearRegExp, compileLinear, fromJavaScriptEscapes } from '../../src/catalog/linear-regex.js';
import { compileSchema } from '../../src/catalog/json-schema.js';
import { DEFAULT_SCHEMA_LIMITS, schemaLimitProblem } from '../../src/catalog/schema-limits.js';

describe('linear-time regular expressions (RE2 semantics, no native build)', () => {
  test('JavaScript \\u escapes become RE2 \\x{…}; an escaped backslash is left alone', () => {
    assert.equal(fromJavaScriptEscapes('^[\\u0000-\\u007F]*$'), '^[\\x{0000}-\\x{007F}]*$');
    assert.equal(fromJavaScriptEscapes('\\u{1F600}'), '\\x{1F600}');
    assert.equal(fromJavaScriptEscapes('\\\\u0041'), '\\\\u0041');
    assert.ok(compileLinear('^[\\u0000-\\u007F]*$').test('plain ascii'));
    assert.ok(!compileLinear('^[\\u0000-\\u007F]*$').test('café'));
    assert.ok(compileLinear('\\\\u0041').test('\\u0041'));
  });

  test('lookaround and backreferences are refused, as RE2 refuses them', () => {
    assert.throws(() => compileLinear('(?=a)b'));
    assert.throws(() => compileLinear('(a)\\1'));
  });

  test('a backtracking-prone pattern on a long argument is answered without backtracking', () => {
    // Not a timing target: V8's RegExp would not return from this in any time a test can wait.
    const validate = compileSchema({ type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } });
    assert.ok(validate({ s: `${'a'.repeat(200_000)}!` }).length > 0);
    assert.deepEqual(validate({ s: 'aaaa' }), []);
    assert.equal(ajvLinearRegExp('^(a|aa)+$', 'u').test(`${'a'.repeat(50_000)}b`), false);
  });

  test('schema checks refuse a pattern RE2 cannot run, naming it', () => {
    const problem = schemaLimitProblem({ type: 'object', properties: { s: { type: 'string', pattern: '(?<=x)y' } } }, DEFAULT_SCHEMA_LIMITS);
    assert.match(problem ?? '', /pattern "\(\?<=x\)y" that is invalid or not supported/);
  });
});
