import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { Catalog, CatalogConflictError, CatalogSourceError, catalogHash, type CatalogSnapshot } from '../../src/catalog/catalog.js';
import { sortInSlices } from '../../src/catalog/slices.js';
import { ToolValidationError } from '../../src/catalog/validate.js';

const tool = (name: string, description = `does ${name}`) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string', description: 'input' } } },
});

describe('Catalog validation', () => {
  const rejects = (input: unknown, pattern: RegExp) =>
    assert.throws(() => new Catalog().setSource('s', input), (error: Error) => {
      assert.ok(error instanceof ToolValidationError, `expected ToolValidationError, got ${error.name}`);
      assert.match(error.message, pattern);
      return true;
    });

  it('accepts valid MCP tools and keeps unknown fields verbatim', () => {
    const catalog = new Catalog();
    catalog.setSource('s', [{ ...tool('a'), icons: [{ src: 'x.png' }], annotations: { readOnlyHint: true } }]);
    assert.deepEqual(catalog.get('a')?.tool, { ...tool('a'), icons: [{ src: 'x.png' }], annotations: { readOnlyHint: true } });
  });
  it('rejects a non-array', () => rejects({ name: 'a' }, /must be an array/));
  it('rejects a missing name', () => rejects([{ inputSchema: { type: 'object' } }], /tools\[0\]: name is required/));
  it('rejects names with spaces or over 128 characters', () => {
    rejects([tool('has space')], /"has space"\): name must be 1-128 characters/);
    rejects([tool('x'.repeat(129))], /name must be 1-128/);
  });
  it('rejects a missing or non-object inputSchema', () => {
    rejects([{ name: 'a' }], /inputSchema/);
    rejects([{ name: 'a', inputSchema: { type: 'string' } }], /inputSchema.type must have "type": "object"/);
  });
  it('rejects an inputSchema that is not valid JSON Schema', () => {
    rejects([{ name: 'a', inputSchema: { type: 'object', properties: { q: { type: 'no-such-type' } } } }], /not a valid JSON Schema/);
  });
  it('rejects duplicate names within a source', () => rejects([tool('a'), tool('a')], /duplicate name "a"/));
  it('lists every problem in one message', () => rejects([tool('ok'), { name: 1 }, tool('bad name')], /tools\[1\].*tools\[2\]/));
  it('rejects bad source names', () => {
    assert.throws(() => new Catalog().setSource('bad/source', []), CatalogSourceError);
  });
  it('changes nothing when validation fails', () => {
    const catalog = new Catalog();
    catalog.setSource('s', [tool('a')]);
    const before = catalog.snapshot().catalogHash;
    assert.throws(() => catalog.setSource('s', [tool('b'), { name: 'bad name' }]));
    assert.equal(catalog.snapshot().catalogHash, before);
    assert.ok(catalog.get('a'));
    assert.equal(catalog.get('b'), undefined);
  });
});

describe('Catalog sources', () => {
  it('replaces a source as a whole', () => {
    const catalog = new Catalog();
    catalog.setSource('s', [tool('a'), tool('b')]);
    catalog.setSource('s', [tool('c')]);
    assert.deepEqual(catalog.snapshot().entries.map((entry) => entry.tool.name), ['c']);
  });
  it('keeps catalog order: sources as added, tools as given', () => {
    const catalog = new Catalog();
    catalog.setSource('one', [tool('z'), tool('y')]);
    catalog.setSource('two', [tool('a')]);
    assert.deepEqual(catalog.snapshot().entries.map((entry) => entry.tool.name), ['z', 'y', 'a']);
  });
  it('refuses a name that belongs to another source, and keeps both sources intact', () => {
    const catalog = new Catalog();
    catalog.setSource('one', [tool('a')]);
    assert.throws(() => catalog.setSource('two', [tool('b'), tool('a')]), (error: Error) => {
      assert.ok(error instanceof CatalogConflictError);
      assert.match(error.message, /"a" \(source "one"\)/);
      return true;
    });
    assert.equal(catalog.get('a')?.source, 'one');
    assert.equal(catalog.hasSource('two'), false);
  });
  it('removes a source and reports unknown ones', () => {
    const catalog = new Catalog();
    catalog.setSource('one', [tool('a')]);
    assert.equal(catalog.removeSource('one'), true);
    assert.equal(catalog.removeSource('one'), false);
    assert.equal(catalog.size, 0);
  });
});

describe('catalog hash', () => {
  const hashOf = (...sources: [string, unknown[]][]) => {
    const catalog = new Catalog();
    for (const [source, tools] of sources) catalog.setSource(source, tools);
    return catalog.snapshot().catalogHash;
  };

  it('is a stable SHA-256 hex digest', () => {
    assert.match(hashOf(['s', [tool('a')]]), /^[0-9a-f]{64}$/);
    assert.equal(hashOf(['s', [tool('a'), tool('b')]]), hashOf(['s', [tool('a'), tool('b')]]));
  });
  it('does not depend on tool or source order', () => {
    assert.equal(hashOf(['s', [tool('a'), tool('b')]]), hashOf(['s', [tool('b'), tool('a')]]));
    assert.equal(hashOf(['x', [tool('a')]], ['y', [tool('b')]]), hashOf(['y', [tool('b')]], ['x', [tool('a')]]));
  });
  it('changes when a description changes', () => {
    assert.notEqual(hashOf(['s', [tool('a', 'one')]]), hashOf(['s', [tool('a', 'two')]]));
  });
  it('changes when a parameter description or title changes', () => {
    const withParam = (description: string) => ({ ...tool('a'), inputSchema: { type: 'object', properties: { q: { type: 'string', description } } } });
    assert.notEqual(hashOf(['s', [withParam('x')]]), hashOf(['s', [withParam('y')]]));
    assert.notEqual(hashOf(['s', [{ ...tool('a'), title: 'A' }]]), hashOf(['s', [tool('a')]]));
  });
  it('changes when a tool is added or renamed', () => {
    assert.notEqual(hashOf(['s', [tool('a')]]), hashOf(['s', [tool('a'), tool('b')]]));
    assert.notEqual(hashOf(['s', [tool('a', 'same')]]), hashOf(['s', [tool('b', 'same')]]));
  });
  it('emits change only when searchable content changes', () => {
    const catalog = new Catalog();
    const seen: CatalogSnapshot[] = [];
    catalog.on('change', (snapshot) => seen.push(snapshot));
    catalog.setSource('s', [tool('a')]);
    catalog.setSource('s', [tool('a')]);
    catalog.setSource('s', [tool('a', 'new words')]);
    assert.equal(seen.length, 2);
    assert.notEqual(seen[0]!.catalogHash, seen[1]!.catalogHash);
  });
});

describe('the catalog hash', () => {
  it('over several sources, set at once or in slices, is the hash of every tool\'s text hash sorted', async () => {
    const catalog = new Catalog();
    const many = Array.from({ length: 20_000 }, (_, i) => tool(`t${(i * 7919) % 20_000}`));
    catalog.setSource('one', [tool('zeta'), tool('alpha')]);
    await catalog.setSourceInSlices('many', many);
    catalog.setSource('two', [tool('mid')]);
    const snapshot = catalog.snapshot();
    assert.equal(snapshot.entries.length, 20_003);
    assert.equal(snapshot.catalogHash, catalogHash(snapshot.entries));
    // The definition, spelled out: one SHA-256 over the sorted per-tool hashes.
    const hash = createHash('sha256');
    for (const textHash of snapshot.entries.map((entry) => entry.textHash).sort()) hash.update(textHash);
    assert.equal(snapshot.catalogHash, hash.digest('hex'));
    catalog.removeSource('one');
    assert.equal(catalog.snapshot().catalogHash, catalogHash(catalog.snapshot().entries));
  });

  it('sortInSlices sorts as Array.prototype.sort does, across runs and merges', async () => {
    const values = Array.from({ length: 5_000 }, (_, i) => `${(i * 2654435761) % 1_000_003}`.padStart(7, 'x'));
    assert.deepEqual(await sortInSlices(values, 333), [...values].sort());
    assert.deepEqual(await sortInSlices([]), []);
  });
});
