import type { CatalogEntry } from '../catalog/catalog.js';
import { compileLinear, type LinearRegex } from '../catalog/linear-regex.js';

/** Entries per block: a block's text is tested in one pass before any of its entries is tested on its own. */
const BLOCK = 64;

/**
 * What regex mode matches for a list of catalog entries (name, title and description, one line each), prepared once
 * per catalog snapshot as blocks of joined text. The engine (RE2 semantics in JavaScript, linear time) answers a
 * boolean test on its DFA several times faster than it finds a match position, and a call per entry costs more
 * than one over many entries' text: so each block of entries is tested in one pass, and only the entries of a
 * block that matches are tested on their own text. Results are exactly those of the per-entry test, in catalog
 * order, and a search stops at the block where `wanted` entries are found.
 */
export class RegexHaystacks {
  private readonly texts: string[];
  /** Each block's entries joined by a newline (which RE2 treats as any other text boundary inside an entry). */
  private readonly blocks: string[] = [];

  constructor(readonly entries: readonly CatalogEntry[]) {
    this.texts = entries.map(({ tool }) => `${tool.name}\n${tool.title ?? ''}\n${tool.description ?? ''}`);
    for (let start = 0; start < this.texts.length; start += BLOCK) this.blocks.push(this.texts.slice(start, start + BLOCK).join('\n'));
  }

  /**
   * Entries whose text matches `pattern` (case-insensitive, RE2 syntax), in catalog order, until `wanted` of them
   * pass `accept`. An invalid pattern matches nothing.
   */
  match(pattern: string, wanted: number, accept: (entry: CatalogEntry) => boolean): CatalogEntry[] {
    let exact: LinearRegex;
    let block: { test(text: string): boolean } | undefined;
    try {
      exact = compileLinear(pattern, { ignoreCase: true });
      if (LITERAL.test(pattern)) {
        // A plain word (most queries): V8's own search for the text (it holds no metacharacter, so it is the same
        // literal to both engines), case-insensitive under Unicode simple case folding as RE2's is, finds the blocks
        // many times faster than a DFA pass; a literal cannot backtrack, and every hit is still confirmed by RE2.
        block = new RegExp(pattern, 'iu');
      } else if (!WHOLE_TEXT_ONLY.test(pattern)) {
        // Multi-line, so `^` and `$` match at every entry's edges: a block's test is true whenever one of its
        // entries' is. Patterns that could tell the joined text from one entry's (text anchors, inline flags) skip
        // the block test.
        block = compileLinear(pattern, { ignoreCase: true, multiline: true });
      }
    } catch {
      return [];
    }
    const found: CatalogEntry[] = [];
    for (let b = 0; b < this.blocks.length && found.length < wanted; b++) {
      if (block && !block.test(this.blocks[b]!)) continue;
      const end = Math.min(this.entries.length, (b + 1) * BLOCK);
      for (let i = b * BLOCK; i < end && found.length < wanted; i++) {
        const entry = this.entries[i]!;
        if (accept(entry) && exact.test(this.texts[i]!)) found.push(entry);
      }
    }
    return found;
  }
}

/** No RE2 metacharacter: the pattern matches its own text. */
const LITERAL = /^[^\\.+*?()|[\]{}^$]*$/;

/** `\A`, `\z` and inline flag groups such as `(?-m)`: where the joined text and a single entry's text differ. */
const WHOLE_TEXT_ONLY = /\\[Az]|\(\?[a-zA-Z-]+[:)]/;
