import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, it, test } from 'node:test';
import { Catalog, type CatalogSnapshot } from '../../src/catalog/catalog.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { createEmbedder, OFFLINE_MODEL_ID, type Embedder } from '../../src/embedding/embedder.js';
import { MemoryEmbeddingCache } from '../../src/indexing/embedding-cache.js';
import { LocalIndexPipeline, type IndexBuilder } from '../../src/indexing/local-pipeline.js';
import { IndexManager } from '../../src/indexing/manager.js';
import { buildSearchIndex, type SearchIndex } from '../../src/indexing/search-index.js';

const tool = (name: string) => ({ name, description: `tool ${name}`, inputSchema: { type: 'object' } });

/** The real builder, with a gate per build so a test decides when each one finishes (or fails). */
class GatedBuilder implements IndexBuilder {
  readonly started: string[] = [];
  private readonly gates: { release: () => void; fail: (error: Error) => void }[] = [];

  constructor(private readonly embedder: Embedder) {}

  async build(snapshot: CatalogSnapshot): Promise<SearchIndex> {
    this.started.push(snapshot.catalogHash);
    await new Promise<void>((release, fail) => this.gates.push({ release, fail }));
    return (await buildSearchIndex(snapshot, { embedder: this.embedder, cache: new MemoryEmbeddingCache() })).index;
  }

  async next(): Promise<{ release: () => void; fail: (error: Error) => void }> {
    while (this.gates.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    return this.gates.shift()!;
  }
}

describe('IndexManager with the in-process pipeline', () => {
  let embedder: Embedder;
  before(async () => {
    embedder = await createEmbedder({ model: OFFLINE_MODEL_ID, modelsDir: path.join(REPO_ROOT, 'models'), allowRemoteModels: false });
  });

  it('serves the previous index while a build runs and swaps when it finishes', async () => {
    const catalog = new Catalog();
    catalog.setSource('s', [tool('first')]);
    const builder = new GatedBuilder(embedder);
    const manager = new IndexManager(catalog.snapshot());
    const pipeline = new LocalIndexPipeline(manager, builder);
    const firstDone = pipeline.update(catalog.snapshot());
    (await builder.next()).release();
    await firstDone;
    const first = manager.current!;
    assert.equal(manager.status().state, 'ready');

    catalog.setSource('s', [tool('first'), tool('second')]);
    const secondDone = pipeline.update(catalog.snapshot());
    const gate = await builder.next();
    assert.equal(manager.status().state, 'building');
    assert.equal(manager.current, first, 'the old index must keep serving during a build');
    gate.release();
    await secondDone;
    assert.equal(manager.current!.catalogHash, catalog.snapshot().catalogHash);
    assert.equal(manager.current!.size, 2);
  });

  it('builds only the newest snapshot after changes during a build', async () => {
    const catalog = new Catalog();
    catalog.setSource('s', [tool('a')]);
    const builder = new GatedBuilder(embedder);
    const manager = new IndexManager(catalog.snapshot());
    const pipeline = new LocalIndexPipeline(manager, builder);
    const done = pipeline.update(catalog.snapshot());
    const gate = await builder.next();
    catalog.setSource('s', [tool('b')]);
    void pipeline.update(catalog.snapshot());
    catalog.setSource('s', [tool('c')]);
    void pipeline.update(catalog.snapshot());
    gate.release();
    (await builder.next()).release();
    await done;
    await pipeline.idle();
    assert.equal(builder.started.length, 2, 'intermediate snapshot b must be skipped');
    assert.equal(manager.current!.catalogHash, catalog.snapshot().catalogHash);
  });

  it('keeps the last good index on failure and reports the error', async () => {
    const catalog = new Catalog();
    catalog.setSource('s', [tool('good')]);
    const builder = new GatedBuilder(embedder);
    const manager = new IndexManager(catalog.snapshot());
    const pipeline = new LocalIndexPipeline(manager, builder);
    const done = pipeline.update(catalog.snapshot());
    (await builder.next()).release();
    await done;
    const good = manager.current;

    catalog.setSource('s', [tool('bad')]);
    const failing = pipeline.update(catalog.snapshot());
    (await builder.next()).fail(new Error('embedding exploded'));
    await failing;
    const status = manager.status();
    assert.equal(status.state, 'failed');
    assert.equal(status.lastError, 'embedding exploded');
    assert.equal(manager.current, good);
    assert.notEqual(status.indexedHash, status.catalogHash);

    const retry = pipeline.rebuild();
    (await builder.next()).release();
    await retry;
    assert.equal(manager.status().state, 'ready');
    assert.equal(manager.status().lastError, undefined);
  });

  it('tries a failed build again after a backoff, showing the error meanwhile, and records the failure after the last try', async () => {
    const catalog = new Catalog();
    catalog.setSource('s', [tool('good')]);
    const builder = new GatedBuilder(embedder);
    const manager = new IndexManager(catalog.snapshot());
    const pipeline = new LocalIndexPipeline(manager, builder, { attempts: 3, backoffMs: 20 });
    const first = pipeline.update(catalog.snapshot());
    (await builder.next()).release();
    await first;
    const good = manager.current;

    // Fails twice (the embeddings server is down), then the third try succeeds with nothing asked of it.
    catalog.setSource('s', [tool('flaky')]);
    const failing = pipeline.update(catalog.snapshot());
    (await builder.next()).fail(new Error('embeddings server down'));
    await failing;
    assert.equal(manager.status().state, 'building');
    assert.match(manager.status().lastError ?? '', /embeddings server down \(try 1 of 3/);
    assert.equal(manager.current, good, 'the last good index keeps serving');
    (await builder.next()).fail(new Error('embeddings server down'));
    (await builder.next()).release();
    await pipeline.idle();
    assert.equal(manager.status().state, 'ready');
    assert.equal(manager.current?.catalogHash, catalog.snapshot().catalogHash);

    // Out of tries: the failure stands (and stays until the catalog changes or a rebuild is asked for).
    catalog.setSource('s', [tool('broken')]);
    const broken = pipeline.update(catalog.snapshot());
    for (let i = 0; i < 3; i++) (await builder.next()).fail(new Error('still down'));
    await broken;
    await pipeline.idle();
    assert.equal(manager.status().state, 'failed');
    assert.equal(manager.status().lastError, 'still down');
    assert.equal(builder.started.length, 1 + 3 + 3);
    await pipeline.close();
  });

  it('never installs an index older than the live one', async () => {
    const catalog = new Catalog();
    catalog.setSource('s', [tool('x')]);
    const manager = new IndexManager(catalog.snapshot());
    const older = (await buildSearchIndex(catalog.snapshot(), { embedder })).index;
    catalog.setSource('s', [tool('y')]);
    const newer = (await buildSearchIndex(catalog.snapshot(), { embedder })).index;
    assert.equal(manager.install(newer, 5), true);
    assert.equal(manager.install(older, 4), false);
    assert.equal(manager.current, newer);
  });
});

describe('MemoryEmbeddingCache', () => {
  test('keeps copies per model, evicts the oldest first past its bound, and later writes never change earlier vectors', async () => {
    const cache = new MemoryEmbeddingCache(3);
    const vector = (value: number) => new Float32Array([value, value + 1, value + 2]);
    const original = vector(1);
    await cache.setMany('m', [{ textHash: 'a', vector: original }, { textHash: 'b', vector: vector(2) }]);
    original.fill(0); // the cache holds its own copy
    await cache.setMany('other', [{ textHash: 'a', vector: vector(9) }]);
    assert.deepEqual([...(await cache.getMany('m', ['a']))[0]!], [1, 2, 3]);
    assert.deepEqual([...(await cache.getMany('other', ['a']))[0]!], [9, 10, 11]);
    await cache.setMany('m', [{ textHash: 'c', vector: vector(3) }]);
    const [a, b, c] = await cache.getMany('m', ['a', 'b', 'c']);
    assert.equal(a, undefined, 'the oldest entry went first');
    assert.deepEqual([...b!], [2, 3, 4]);
    assert.deepEqual([...c!], [3, 4, 5]);
  });
});
