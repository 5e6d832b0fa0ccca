import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Catalog } from '../../src/catalog/catalog.js';
import { loadConfig } from '../../src/config/config.js';
import { createEmbedder, type Embedder } from '../../src/embedding/embedder.js';
import type { SearchIndex } from '../../src/indexing/search-index.js';
import { WorkerIndexBuilder } from '../../src/indexing/worker-builder.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';
import { syntheticTools } from '../helpers/synthetic.js';

/**
 * Without Redis the index is built in a worker thread: embedding, BM25 and HNSW for 100,000 tools take tens of seconds
 * of CPU, and on the API's thread every request would wait for them. While such a build is in flight the probes and
 * searches (served from the previous index) must keep answering.
 */
describe('in-process index builds run off the request thread', () => {
  let api: RunningRouter;

  before(async () => {
    api = await startRouter({ bodyLimit: '200mb', catalog: { sources: { base: syntheticTools(50, 'base') } } });
    await api.indexed();
  });

  after(async () => {
    // Ends the build thread mid-build: shutdown does not wait for it.
    await api.close();
  });

  async function timed(method: string, route: string, body?: unknown): Promise<{ status: number; body: any; ms: number }> {
    const started = performance.now();
    const reply = await api.request(method, route, body);
    return { status: reply.status, body: reply.body, ms: performance.now() - started };
  }

  test('/health and a search answer within 1 s while a 100,000-tool build is in flight', async () => {
    const baseHash = api.router.indexes.current!.catalogHash;
    const put = await api.request('PUT', '/v1/catalog/sources/bulk', { tools: syntheticTools(100_000, 'bulk') });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const bulkHash = put.body.catalogHash as string;

    let probes = 0;
    // Bounded: at most 20 rounds, stopping early once the build has finished.
    for (let round = 0; round < 20; round++) {
      const status = await timed('GET', '/v1/index/status');
      if (status.body.indexedHash === bulkHash) break;
      assert.equal(status.body.state, 'building');
      const health = await timed('GET', '/health');
      assert.equal(health.status, 200);
      assert.ok(health.ms < 1000, `/health took ${health.ms.toFixed(0)} ms during the build`);
      const search = await timed('POST', '/v1/tools/search', { query: 'create an invoice in the billing system' });
      assert.equal(search.status, 200, JSON.stringify(search.body));
      assert.ok(search.ms < 1000, `search took ${search.ms.toFixed(0)} ms during the build`);
      // Served from the index that was live before the PUT.
      assert.equal(search.body.index.hash, baseHash);
      assert.ok(search.body.results.length > 0);
      probes++;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    // Every probe saw the build in flight (state "building"), so at least 10 of them ran while it was.
    assert.ok(probes >= 10, `only ${probes} probes ran before the build finished; the test proves nothing`);
  });
});

/**
 * The PUT itself does catalog-sized work before it answers (validation, each tool's searchable text, handing the texts
 * to the build thread): done in slices, with other requests served in between.
 */
describe('a 100,000-tool PUT leaves the event loop free', () => {
  let api: RunningRouter;

  before(async () => {
    api = await startRouter({ bodyLimit: '200mb' });
  });

  after(async () => {
    await api.close();
  });

  async function timed(method: string, route: string): Promise<{ status: number; ms: number }> {
    const started = performance.now();
    const reply = await api.request(method, route);
    return { status: reply.status, ms: performance.now() - started };
  }

  test('/health and /v1/index/status answer within 1 s while a 100,000-tool PUT is parsed, validated and its texts prepared', async () => {
    const put = api.request('PUT', '/v1/catalog/sources/bulk-put', { tools: syntheticTools(100_000, 'put') });
    let done = false;
    void put.finally(() => (done = true));
    const slowest: number[] = [];
    // Bounded by the PUT: one probe every 50 ms until it has answered.
    while (!done) {
      const health = await timed('GET', '/health');
      assert.equal(health.status, 200);
      slowest.push(health.ms);
      // The body (~25 MB) is parsed in slices (src/http/json-slices.ts), so the status route answers during that too.
      const status = await timed('GET', '/v1/index/status');
      assert.equal(status.status, 200);
      slowest.push(status.ms);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal((await put).status, 200);
    assert.ok(slowest.length >= 5, `only ${slowest.length} probes ran during the PUT; the test proves nothing`);
    assert.ok(Math.max(...slowest) < 1000, `a probe took ${Math.max(...slowest).toFixed(0)} ms during the PUT (probes: ${slowest.map((ms) => ms.toFixed(0)).join(' ')})`);
  });
});

describe('the build thread', () => {
  test('builds the index of the snapshot it is given, one build after another, each in a thread that ends with it', async () => {
    const config = loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent' });
    const builder = new WorkerIndexBuilder({ embedder: await createEmbedder(config.embedding), lexical: config.search.lexical, hnsw: config.search.hnsw });
    try {
      const catalog = new Catalog();
      catalog.setSource('s', syntheticTools(30, 'thread'));
      const first = await builder.build(catalog.snapshot());
      assert.equal(first.catalogHash, catalog.snapshot().catalogHash);
      assert.equal(first.size, 30);
      const seventh = catalog.snapshot().entries[7]!.tool.name;
      assert.equal(first.lexical.search('thread7', 1)[0]?.name, seventh);
      assert.equal(first.model, (await createEmbedder(config.embedding)).modelId);
      const [query] = await (await createEmbedder(config.embedding)).embed([catalog.snapshot().entries[7]!.tool.description!]);
      assert.equal(first.vectors.search(query!, 1)[0]?.name, seventh);
      // The thread's memory goes with it between builds.
      assert.equal(builder.running, false);
      catalog.setSource('s', syntheticTools(40, 'thread'));
      const second = await builder.build(catalog.snapshot());
      assert.equal(second.size, 40);
      assert.equal(second.catalogHash, catalog.snapshot().catalogHash);
    } finally {
      await builder.close();
    }
    assert.equal(builder.running, false);
    await assert.rejects(builder.build(new Catalog().snapshot()), /closed/);
  });

  test('a catalog past the two-thread size is built with BM25 and the graph in a thread each (the offline model embedding in BM25\'s), to the same index as one thread builds', async () => {
    const config = loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent' });
    const embedder = await createEmbedder(config.embedding);
    assert.ok(embedder.threadable, 'the offline model can be made again in a thread');
    const options = { embedder, lexical: config.search.lexical, hnsw: config.search.hnsw };
    const catalog = new Catalog();
    // Past the exact-scan threshold, so the vectors are a graph written and read back as a file.
    catalog.setSource('s', syntheticTools(config.search.hnsw.exactThreshold + 500, 'split'));
    const snapshot = catalog.snapshot();
    const stats: Record<string, number> = {};
    const builder = (name: string, extra: { twoThreadsAbove: number; embedInThread?: boolean; embedder?: Embedder }) =>
      new WorkerIndexBuilder({ ...options, ...extra, onBuilt: (built) => (stats[name] = built.embedded) });
    // This thread's embedder, counting what it is asked: nothing, when the build thread embeds.
    let embeddedHere = 0;
    const counting: Embedder = {
      modelId: embedder.modelId,
      cacheKey: embedder.cacheKey,
      dimensions: embedder.dimensions,
      threadable: embedder.threadable!,
      embed: (texts, embedOptions) => ((embeddedHere += texts.length), embedder.embed(texts, embedOptions)),
    };
    const inThread = builder('inThread', { twoThreadsAbove: 0, embedder: counting });
    const split = builder('split', { twoThreadsAbove: 0, embedInThread: false });
    const single = builder('single', { twoThreadsAbove: Infinity });
    try {
      const [threadEmbedded, two, one] = [await inThread.build(snapshot), await split.build(snapshot), await single.build(snapshot)];
      assert.equal(embeddedHere, 0, 'the build thread embedded the texts, not this one');
      assert.equal(inThread.running, false, 'both threads end with the build');
      assert.equal(split.running, false, 'both threads end with the build');
      // Every text was embedded once (no embedding cache here), in the thread or on this one.
      assert.deepEqual(stats, { inThread: snapshot.entries.length, split: snapshot.entries.length, single: snapshot.entries.length });
      for (const index of [threadEmbedded, two]) {
        assert.equal(index.size, snapshot.entries.length);
        assert.equal(index.vectors.kind, 'hnsw');
      }
      for (const query of ['split7', 'create an invoice', 'send a message to the team']) {
        const [vector] = await embedder.embed([query], { role: 'query' });
        for (const index of [threadEmbedded, two]) {
          assert.deepEqual(index.lexical.search(query, 10), one.lexical.search(query, 10));
          assert.deepEqual(index.vectors.search(vector!, 10), one.vectors.search(vector!, 10));
        }
      }
    } finally {
      await inThread.close();
      await split.close();
      await single.close();
    }
  });

  test('a few tools changed in place reuse the previous graph: only their texts are embedded, and search finds what a fresh build finds', async () => {
    const config = loadConfig({ TOOLROUTER_CONFIG: '' }, { logLevel: 'silent' });
    const embedder = await createEmbedder(config.embedding);
    const tools = syntheticTools(config.search.hnsw.exactThreshold + 500, 'reuse');
    const catalog = new Catalog();
    catalog.setSource('s', tools);
    const before = catalog.snapshot();
    const changedTool = { ...tools[7]!, description: 'Converts kelvin readings into fahrenheit for the greenhouse dashboard' };
    catalog.setSource('s', tools.map((tool, i) => (i === 7 ? changedTool : tool)));
    const after = catalog.snapshot();
    const embedded: Record<string, number[]> = {};
    const builder = (name: string, extra: { embedInThread?: boolean; reuseGraph?: boolean }) =>
      new WorkerIndexBuilder({
        embedder,
        lexical: config.search.lexical,
        hnsw: config.search.hnsw,
        twoThreadsAbove: 0,
        ...extra,
        onBuilt: (stats) => (embedded[name] ??= []).push(stats.embedded),
      });
    const inThread = builder('inThread', {});
    const here = builder('here', { embedInThread: false });
    const fresh = builder('fresh', { reuseGraph: false });
    try {
      const indexes: Record<string, SearchIndex> = {};
      for (const [name, built] of [['inThread', inThread], ['here', here], ['fresh', fresh]] as const) {
        await built.build(before);
        indexes[name] = await built.build(after);
      }
      const total = after.entries.length;
      // The second build embedded the one changed text, unless told to build afresh.
      assert.deepEqual(embedded, { inThread: [total, 1], here: [total, 1], fresh: [total, total] });
      const [changedQuery] = await embedder.embed([changedTool.description], { role: 'query' });
      for (const index of Object.values(indexes)) assert.equal(index.vectors.search(changedQuery!, 1)[0]?.name, changedTool.name);
      for (const query of ['create an invoice', 'send a message to the team', 'reuse12']) {
        const [vector] = await embedder.embed([query], { role: 'query' });
        const reference = indexes.fresh!.vectors.search(vector!, 10).map((hit) => hit.name);
        for (const name of ['inThread', 'here']) {
          const found = indexes[name]!.vectors.search(vector!, 10).map((hit) => hit.name);
          assert.ok(found.filter((hit) => reference.includes(hit)).length >= 9, `${name}: ${found.join()} against ${reference.join()}`);
          assert.deepEqual(indexes[name]!.lexical.search(query, 10), indexes.fresh!.lexical.search(query, 10));
        }
      }
      // A tool added (the positions move): built afresh, every text embedded.
      catalog.setSource('s', [...tools, ...syntheticTools(1, 'added')]);
      await inThread.build(catalog.snapshot());
      assert.equal(embedded.inThread!.at(-1), total + 1);
    } finally {
      await Promise.all([inThread.close(), here.close(), fresh.close()]);
    }
  });
});
