import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Tool } from '../../src/catalog/types.js';
import { codeTool, toolSignature } from '../../src/codemode/signatures.js';

describe('code mode signatures (detail "code")', () => {
  it('renders parameters, optionality, docs and the structured result', () => {
    const tool: Tool = {
      name: 'math__add',
      description: 'Add two numbers and return their sum. Extra sentences are left out.',
      inputSchema: {
        type: 'object',
        properties: { a: { type: 'number', description: 'first addend' }, b: { type: 'integer' }, note: { type: 'string' } },
        required: ['a', 'b'],
      },
      outputSchema: { type: 'object', properties: { sum: { type: 'number' } }, required: ['sum'] },
    };
    assert.equal(
      toolSignature(tool),
      '/** Add two numbers and return their sum. */\n' +
        'declare function call_tool(name: "math__add", args: { /** first addend */ a: number; b: number; note?: string; }): Promise<{ sum: number; }>;',
    );
  });

  it('says string for tools without an outputSchema (call_tool then gives their text)', () => {
    assert.match(toolSignature({ name: 'echo', inputSchema: { type: 'object' } }), /args: Record<string, unknown>\): Promise<string>;$/);
  });

  it('renders enums, unions, arrays, nested objects, nullable types and odd property names', () => {
    const signature = toolSignature({
      name: 'tracker__create',
      inputSchema: {
        type: 'object',
        properties: {
          state: { enum: ['open', 'closed'] },
          labels: { type: 'array', items: { type: 'string' } },
          'x-trace-id': { type: ['string', 'null'] },
          where: { type: 'object', properties: { repo: { type: 'string' } }, required: ['repo'], additionalProperties: false },
          either: { anyOf: [{ type: 'number' }, { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'boolean' }] } }] },
          kind: { const: 'bug' },
          ref: { $ref: '#/$defs/thing' },
        },
        required: ['state'],
      },
    });
    assert.match(signature, /state: "open" \| "closed";/);
    assert.match(signature, /labels\?: string\[\];/);
    assert.match(signature, /"x-trace-id"\?: string \| null;/);
    assert.match(signature, /where\?: \{ repo: string; \};/);
    assert.match(signature, /either\?: number \| \(string \| boolean\)\[\];/);
    assert.match(signature, /kind\?: "bug";/);
    assert.match(signature, /ref\?: unknown;/);
  });

  it('stays bounded on hostile schemas: deep nesting, huge property lists, comment terminators', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 200; i++) deep = { type: 'object', properties: { next: deep } };
    const properties: Record<string, unknown> = {};
    for (let i = 0; i < 5_000; i++) properties[`field_${i}`] = { type: 'string', description: 'x'.repeat(500) };
    const signature = toolSignature({
      name: 'evil',
      description: 'Closes the comment */ and then some',
      inputSchema: { type: 'object', properties: { deep, ...properties } as never },
    });
    assert.ok(signature.length < 6_000, `${signature.length} characters`);
    assert.equal(signature.split('*/').length, 2, 'only the doc comment itself closes a comment');
    const { name, signature: again } = codeTool({ name: 'evil2', inputSchema: { type: 'object', properties: { deep } as never } });
    assert.equal(name, 'evil2');
    assert.match(again, /unknown/);
  });
});
