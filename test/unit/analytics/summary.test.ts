import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { summarise, trafficLabels } from '../../../src/analytics/summary.js';
import type { SearchRecord } from '../../../src/analytics/types.js';

const NOW = 1_000_000_000;
const WINDOW = 600_000;
let n = 0;
const search = (query: string, found: string[], extra: Partial<SearchRecord> = {}): SearchRecord => ({
  id: `s${n++}`,
  time: NOW - WINDOW - 1,
  surface: 'mcp',
  query,
  results: found.map((name) => ({ name, score: 0.5 })),
  matched: found.length,
  abstained: found.length === 0,
  ms: 1,
  ...extra,
});

describe('search summary', () => {
  it('counts outcomes, groups misses, and lists tools most called and never found', () => {
    const records = [
      search('send mail', ['mail__send'], { called: 'mail__send' }),
      search('email bob', ['mail__send', 'chat__post'], { called: 'mail__send' }),
      search('post to the channel', ['chat__post'], { called: 'chat__post' }),
      search('book a flight', []),
      search('book a flight', []),
      search('weather in oslo', ['chat__post']),
      search('just now', ['chat__post'], { time: NOW - 1_000 }),
      search('', ['chat__post']),
    ];
    const summary = summarise(records, ['mail__send', 'chat__post', 'cal__create', 'fs__read'], { now: NOW, windowMs: WINDOW });
    assert.equal(summary.searches, 8);
    assert.equal(summary.answered, 3);
    assert.equal(summary.abstained, 2);
    assert.equal(summary.unanswered, 3);
    assert.equal(summary.waiting, 1, 'a search still inside the window');
    // Grouped and most frequent first; the waiting search is not a miss yet, and an unkept query ('') is not grouped.
    assert.deepEqual(summary.misses, [{ query: 'book a flight', count: 2 }, { query: 'weather in oslo', count: 1 }]);
    assert.deepEqual(summary.top_tools, [{ name: 'mail__send', count: 2 }, { name: 'chat__post', count: 1 }]);
    assert.deepEqual(summary.unused_tools, ['cal__create', 'fs__read']);
    assert.equal(summary.unused_count, 2);
  });

  it('labels each answered prose search with the tool then called, leaving out select:, regex: and hashed queries', () => {
    const labels = trafficLabels([
      search('send mail', ['mail__send'], { called: 'mail__send' }),
      search('select:mail__send', ['mail__send'], { called: 'mail__send' }),
      search('regex:^mail', ['mail__send'], { called: 'mail__send' }),
      search('sha256:abcd', ['mail__send'], { called: 'mail__send' }),
      search('never called', ['mail__send']),
    ]);
    assert.deepEqual(labels.map(({ query, expected }) => ({ query, expected })), [{ query: 'send mail', expected: ['mail__send'] }]);
  });
});
