import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { compileLinear, type LinearRegex } from '../../src/catalog/linear-regex.js';
import type { CatalogEntry } from '../../src/catalog/catalog.js';
import { RegexHaystacks } from '../../src/search/regex.js';

function entry(name: string, description: string, title?: string): CatalogEntry {
  return { tool: { name, description, ...(title ? { title } : {}), inputSchema: { type: 'object' } }, source: 's', text: {} as CatalogEntry['text'], textHash: name };
}

/** The definition regex mode must keep: each entry's own text tested on its own. */
function perEntry(entries: CatalogEntry[], pattern: string, wanted: number): string[] {
  let re: LinearRegex;
  try {
    re = compileLinear(pattern, { ignoreCase: true });
  } catch {
    return [];
  }
  return entries
    .filter(({ tool }) => re.test(`${tool.name}\n${tool.title ?? ''}\n${tool.description ?? ''}`))
    .slice(0, wanted)
    .map((e) => e.tool.name);
}

describe('regex mode over prepared text', () => {
  const entries = [
    entry('send_email', 'Send an email message to a recipient'),
    entry('read_inbox', 'List the messages in the inbox', 'Inbox'),
    entry('créer_facture', 'Crée une facture — émoji 🧾 inclus'),
    entry('get_weather', 'Weather forecast for a city'),
    entry('email_digest', ''),
  ];
  const haystacks = new RegexHaystacks(entries);
  const names = (pattern: string, wanted = 10) => haystacks.match(pattern, wanted, () => true).map((e) => e.tool.name);

  test('anchors, spans across lines and entries, text anchors and multibyte text give the per-entry answer', () => {
    for (const pattern of ['^send', 'recipient$', '^inbox$', 'recipient\\s+list', 'recipient[\\s\\S]*weather', '\\Aread', 'digest\\z', 'facture', '🧾', '', 'x*', '(?i)EMAIL', '(?m)^inbox$', 'a.b', '(', 'e']) {
      assert.deepEqual(names(pattern), perEntry(entries, pattern, 10), pattern);
    }
  });

  test('stops at the number wanted and skips what the caller may not see', () => {
    assert.deepEqual(names('e', 2), ['send_email', 'read_inbox']);
    assert.deepEqual(haystacks.match('email', 5, (e) => e.tool.name !== 'send_email').map((e) => e.tool.name), ['email_digest']);
  });

  test('agrees with the per-entry test on random catalogs and patterns', () => {
    const word = fc.stringMatching(/^[a-zé ]{0,12}$/);
    const pattern = fc.oneof(
      word,
      fc.tuple(fc.constantFrom('^', '', '\\b'), fc.stringMatching(/^[a-z]{1,3}$/), fc.constantFrom('$', '', '[\\s\\S]*', '\\s', '.*')).map((parts) => parts.join('')),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.stringMatching(/^[a-z_]{1,8}$/), word), { maxLength: 12 }), pattern, fc.integer({ min: 1, max: 5 }), (tools, p, wanted) => {
        const list = tools.map(([name, description], i) => entry(`${name}${i}`, description));
        const got = new RegexHaystacks(list).match(p, wanted, () => true).map((e) => e.tool.name);
        assert.deepEqual(got, perEntry(list, p, wanted), p);
      }),
      { numRuns: 300 },
    );
  });

  test('catalogs spanning many blocks give the per-entry answer, literal or not', () => {
    const words = ['alpha', 'beta', 'gamma', 'delta', 'epsilon'];
    const list = Array.from({ length: 300 }, (_, i) => entry(`tool_${i}`, `${words[i % 5]} ${words[(i * 3) % 5]} number ${i}`));
    const many = new RegexHaystacks(list);
    for (const pattern of ['number 299', 'tool_2', 'GAMMA delta', '^tool_1\\d\\d$', 'epsilon\\s+alpha', 'number 1$', 'zzz']) {
      for (const wanted of [1, 7, 500]) {
        assert.deepEqual(many.match(pattern, wanted, () => true).map((e) => e.tool.name), perEntry(list, pattern, wanted), `${pattern} ${wanted}`);
      }
    }
  });

  test('plain words fold case as RE2 does (Kelvin sign, long s, final sigma), and nothing else', () => {
    const list = [entry('kelvin', 'temperature in \u212A'), entry('strasse', 'ſtraße'), entry('greek', 'λόγος'), entry('dotted', 'İstanbul')];
    const folded = new RegexHaystacks(list);
    for (const pattern of ['k', 'STRASSE', 'ſ', 'S', 'ΛΌΓΟΣ', 'σ', 'istanbul', 'İ', 'ß']) {
      assert.deepEqual(folded.match(pattern, 10, () => true).map((e) => e.tool.name), perEntry(list, pattern, 10), pattern);
    }
  });
});
