import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { SearchLog } from '../../../src/analytics/log.js';
import { MemorySearchLogStore, RedisSearchLogStore, type SearchLogStore } from '../../../src/analytics/store.js';
import { DEFAULT_ANALYTICS_SETTINGS, type AnalyticsSettings } from '../../../src/analytics/types.js';
import type { SearchHit } from '../../../src/search/search.js';
import { Metrics } from '../../../src/metrics.js';
import { RedisKeys } from '../../../src/redis/connection.js';
import { REDIS_URL } from '../../helpers/processes.js';

const hits = (...names: string[]): SearchHit[] => names.map((name, i) => ({ tool: { name, inputSchema: { type: 'object' } }, score: 0.8 - i * 0.1, scores: {} }) as SearchHit);
const settings = (extra: Partial<AnalyticsSettings> = {}): AnalyticsSettings => ({ ...DEFAULT_ANALYTICS_SETTINGS, ...extra });
const memory = () => new MemorySearchLogStore({ maxEntries: 100, maxAgeDays: 30 });

async function outcomes(metrics: Metrics): Promise<Record<string, number>> {
  const values = (await metrics.searchOutcomes.get()).values;
  return Object.fromEntries(values.map((value) => [`${value.labels.surface}/${value.labels.outcome}`, value.value]));
}

describe('search log', () => {
  it('keeps queries as typed, as a SHA-256, or not at all (analytics.queries), and still credits the call in every mode', async () => {
    for (const queries of ['full', 'hash', 'off'] as const) {
      const log = new SearchLog({ settings: settings({ queries }), store: memory() });
      log.searched({ surface: 'mcp', key: 'k1', query: '  send the weekly report ', results: hits('mail__send', 'chat__post'), matched: 7, ms: 3.25 });
      log.credited({ query: 'send the weekly report', tool: 'chat__post', scope: 'k1' });
      await log.close();
      const [logged] = await log.list({ limit: 10 });
      const expected = { full: 'send the weekly report', hash: `sha256:${createHash('sha256').update('send the weekly report').digest('hex')}`, off: '' }[queries];
      assert.equal(logged!.query, expected);
      assert.equal(logged!.called, 'chat__post', queries);
      assert.equal(logged!.matched, 7);
      assert.deepEqual(logged!.results.map((result) => result.name), ['mail__send', 'chat__post']);
    }
  });

  it('credits only the same caller: another key calling the tool after the same query does not answer this search', async () => {
    const log = new SearchLog({ settings: settings(), store: memory() });
    log.searched({ surface: 'rest', key: 'k1', query: 'resize an image', results: hits('img__resize'), ms: 1 });
    log.credited({ query: 'resize an image', tool: 'img__resize', scope: 'k2' });
    await log.close();
    assert.equal((await log.list({ limit: 1 }))[0]!.called, undefined);
  });

  it('counts outcomes: abstained at once, answered on the credit, unanswered once the window passes without a call', async () => {
    const metrics = new Metrics();
    const log = new SearchLog({ settings: settings(), store: memory(), metrics, windowMs: 50 });
    log.searched({ surface: 'mcp', query: 'nothing fits this', results: [], ms: 1 });
    log.searched({ surface: 'mcp', query: 'add numbers', results: hits('calc__add'), ms: 1 });
    log.searched({ surface: 'proxy', query: 'never followed', results: hits('calc__add'), ms: 1 });
    log.credited({ query: 'add numbers', tool: 'calc__add', scope: undefined });
    await log.flush();
    assert.deepEqual(await outcomes(metrics), { 'mcp/abstained': 1, 'mcp/answered': 1 });
    // The sweep runs at most every second; the proxy search's window has passed by then.
    const deadline = Date.now() + 10_000;
    while (!(await outcomes(metrics))['proxy/unanswered'] && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(await outcomes(metrics), { 'mcp/abstained': 1, 'mcp/answered': 1, 'proxy/unanswered': 1 });
    await log.close();
  });

  it('never fails or waits for the caller: a failing store and a full queue drop writes and count them', async () => {
    const metrics = new Metrics();
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const failing: SearchLogStore = {
      append: async () => {
        await stuck;
        throw new Error('store away');
      },
      credit: async () => undefined,
      list: async () => [],
      calledOf: async () => [],
    };
    const log = new SearchLog({ settings: settings(), store: failing, metrics, maxQueued: 3 });
    const started = performance.now();
    for (let i = 0; i < 10; i++) log.searched({ surface: 'rest', query: `q${i}`, results: hits('a'), ms: 1 });
    assert.ok(performance.now() - started < 200, 'recording returned at once');
    release();
    await log.close();
    // One write was taken by the loop, three queued, six dropped at once; the four that ran failed.
    assert.equal((await metrics.searchLogDropped.get()).values[0]!.value, 10);
  });
});

describe('search log shared through Redis', () => {
  const redis = new Redis(REDIS_URL);
  const prefix = `trtest-anlog-${randomUUID().slice(0, 8)}`;
  after(async () => {
    const leftovers = await redis.keys(`${prefix}*`);
    if (leftovers.length > 0) await redis.del(...leftovers);
    redis.disconnect();
  });

  it('a search recorded on one instance is credited by a call on another, and both read one log', async () => {
    const bus = { redis, keys: new RedisKeys(prefix) } as never;
    const store = () => new RedisSearchLogStore(bus, { maxEntries: 100, maxAgeDays: 30 });
    const one = new SearchLog({ settings: settings(), store: store() });
    const two = new SearchLog({ settings: settings(), store: store() });
    one.searched({ surface: 'proxy', key: 'k9', query: 'open a pull request', results: hits('git__pr', 'git__push'), ms: 2 });
    await one.flush();
    two.credited({ query: 'open a pull request', tool: 'git__pr', scope: 'k9' });
    await two.flush();
    const [fromOne] = await one.list({ limit: 5 });
    const [fromTwo] = await two.list({ limit: 5 });
    assert.equal(fromOne!.called, 'git__pr');
    assert.deepEqual(fromOne, fromTwo);
    await one.close();
    await two.close();
  });
});
