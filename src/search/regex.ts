import RE2 from 're2';
import type { CatalogEntry } from '../catalog/catalog.js';

/**
 * What regex mode matches for a list of catalog entries (name, title and description, one line each), prepared once
 * per catalog snapshot as one UTF-8 buffer. Testing entries one by one costs a native call and a string encoding per
 * tool (70 ms at 10k tools for a pattern that matches nothing); one pass of RE2 over the joined text finds the
 * candidates, and each candidate is confirmed on its own text, so results are exactly those of the per-entry test.
 */
export class RegexHaystacks {
  private readonly text: Buffer;
  /** Byte offset where each entry's text starts in `text`, plus one past the end. */
  private readonly starts: Uint32Array;

  constructor(readonly entries: readonly CatalogEntry[]) {
    const parts = entries.map(({ tool }) => Buffer.from(`${tool.name}\n${tool.title ?? ''}\n${tool.description ?? ''}`));
    this.starts = new Uint32Array(parts.length + 1);
    let offset = 0;
    parts.forEach((part, i) => {
      this.starts[i] = offset;
      offset += part.length + 1;
    });
    this.starts[parts.length] = offset;
    // Entries are separated by a newline, which RE2 treats as any other text boundary inside an entry.
    this.text = Buffer.alloc(offset, '\n');
    parts.forEach((part, i) => part.copy(this.text, this.starts[i]));
  }

  /**
   * Entries whose text matches `pattern` (case-insensitive, RE2 syntax), in catalog order, until `wanted` of them
   * pass `accept`. An invalid pattern matches nothing.
   */
  match(pattern: string, wanted: number, accept: (entry: CatalogEntry) => boolean): CatalogEntry[] {
    let exact: RE2;
    let scan: RE2 | undefined;
    try {
      exact = new RE2(pattern, 'i');
      // Multi-line, so `^` and `$` match at every entry's edges: the pass over all text finds a superset of the
      // entries the per-entry test accepts. Patterns that could tell the joined text from one entry's (text anchors,
      // inline flags) are tested entry by entry instead.
      scan = WHOLE_TEXT_ONLY.test(pattern) ? undefined : new RE2(pattern, 'gim');
    } catch {
      return [];
    }
    const found: CatalogEntry[] = [];
    const take = (i: number) => {
      const entry = this.entries[i]!;
      if (accept(entry) && exact.test(this.entryText(i))) found.push(entry);
    };
    if (!scan) {
      for (let i = 0; i < this.entries.length && found.length < wanted; i++) take(i);
      return found;
    }
    scan.lastIndex = 0;
    while (found.length < wanted && scan.lastIndex < this.text.length) {
      const match = scan.exec(this.text);
      if (!match) break;
      const i = this.entryAt(match.index);
      take(i);
      // On to the next entry from its start: a match that ran over into it must not hide one of its own.
      scan.lastIndex = this.starts[i + 1]!;
    }
    return found;
  }

  private entryText(i: number): Buffer {
    return this.text.subarray(this.starts[i], this.starts[i + 1]! - 1);
  }

  /** The entry whose text (or trailing separator) holds byte `offset`. */
  private entryAt(offset: number): number {
    let low = 0;
    let high = this.entries.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >>> 1;
      if (this.starts[mid]! <= offset) low = mid;
      else high = mid - 1;
    }
    return low;
  }
}

/** `\A`, `\z` and inline flag groups such as `(?-m)`: where the joined text and a single entry's text differ. */
const WHOLE_TEXT_ONLY = /\\[Az]|\(\?[a-zA-Z-]+[:)]/;
