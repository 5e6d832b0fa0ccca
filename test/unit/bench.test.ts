import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateCatalog } from '../../bench/catalog.js';
import { Catalog } from '../../src/catalog/catalog.js';

describe('bench catalog generator', () => {
  it('is deterministic and yields the requested number of valid, distinct tools', () => {
    const count = 3_000;
    const first = generateCatalog(count);
    assert.equal(first.length, count);
    assert.deepEqual(generateCatalog(count), first);
    assert.equal(new Set(first.map((tool) => tool.name)).size, count);
    // Every variant's searchable text differs, so a cold build really embeds every tool.
    assert.equal(new Set(first.map((tool) => `${tool.name}\n${tool.description}`)).size, count);
    // The catalog accepts them as a static source (names, schemas), as the benchmark's PUT does.
    const snapshot = new Catalog().setSource('bench', first);
    assert.equal(snapshot.entries.length, count);
  });
});
