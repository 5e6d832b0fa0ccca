import { stemmer } from 'stemmer';
import { eng as englishStopWords } from 'stopword';
import { SEARCHABLE_FIELDS, tokenize, type SearchableField, type SearchableText } from '../catalog/text.js';
import { LabelSet } from './label-set.js';
import { TopK } from './top-k.js';

/** Relative weight of each searchable field in BM25 scoring. */
export type FieldWeights = Record<SearchableField, number>;

export interface LexicalSettings {
  /** A weight of 0 leaves the field out of scoring. */
  fieldWeights: FieldWeights;
  /** BM25 term-frequency saturation (k1), length normalisation (b) and BM25+ lower bound (d). */
  bm25: { k: number; b: number; d: number };
  /** Porter-stem English words so "papers" matches "paper" and "scheduling" matches "schedule". */
  stem: boolean;
  /**
   * Drop English stop words (the `stopword` package's list) from documents and queries alike: agents phrase requests
   * as sentences ("Can I find ..."), and in a small catalog "can" or "for" still carry idf. On MetaTool this lifts
   * BM25 MRR from 0.40 to 0.51.
   */
  stopWords: boolean;
}

/** Defaults chosen on MetaTool, LiveMCPBench and the project fixture (see BENCHMARKS.md). */
export const DEFAULT_LEXICAL: LexicalSettings = {
  fieldWeights: { name: 3, title: 2, description: 1, server: 1, params: 0.5, context: 0.5 },
  bm25: { k: 1.5, b: 0.75, d: 0 },
  stem: true,
  stopWords: true,
};

export interface ScoredName {
  name: string;
  score: number;
  /**
   * BM25 only: the share of the query's terms, weighted by idf, that this tool matched (0–1). Unlike the raw score it
   * does not grow with the query's length, so it says the same across queries: the calibrated score reads it.
   */
  coverage?: number;
}

type Analysis = Pick<LexicalSettings, 'stem' | 'stopWords'>;

const FIELD_COUNT = SEARCHABLE_FIELDS.length;

/**
 * What the index holds, independent of the scoring parameters (field weights, k1, b, d), which apply at search
 * time. Postings are compressed-row: the postings of term t in field f are `docs`/`tfs` from
 * `postingStart[t·F + f]` to `postingStart[t·F + f + 1]`, in ascending document order.
 */
interface LexicalData {
  analysis: Analysis;
  names: string[];
  terms: string[];
  postingStart: Uint32Array;
  docs: Uint32Array;
  tfs: Uint16Array | Uint32Array;
  /** doc·F + field → distinct words in the field, counted before stop words and stemming. */
  fieldLengths: Uint32Array;
  averageFieldLengths: Float64Array;
}

/** A LexicalIndex without its names, as `parts()` gives it (structured-clonable; the arrays transferable). */
export type LexicalParts = Omit<LexicalData, 'names'>;

/** Serialised layout version of `LexicalIndex.serialize`. */
const FORMAT = 1;

interface SerialHeader {
  format: number;
  fields: string[];
  analysis: Analysis;
  names: string[];
  terms: string[];
  averageFieldLengths: number[];
  postings: number;
  tfBytes: 2 | 4;
}

/**
 * BM25 over the tool's searchable fields: each field scored on its own (its own document frequency and average
 * length), weighted, and summed per query term; a tool's total is then multiplied by the number of distinct query
 * terms it matched. These are exactly the semantics (and the floating-point arithmetic, in the same order) of
 * MiniSearch 7, which this replaced: a test holds the two equal. Our own typed-array postings make a query at 100k
 * tools touch flat arrays instead of MiniSearch's per-document maps and result objects (21 ms → under 1 ms), take a
 * tenth of its memory, and serialise as binary.
 */
export class LexicalIndex {
  private readonly termIds: Map<string, number>;
  private readonly analyze: (word: string) => string | null;
  /** doc·F + field → k1 · (1 − b + b · length / average length), the length part of BM25's denominator. */
  private norms: Float64Array | undefined;
  private scratch: Scratch | undefined;

  private constructor(
    private readonly data: LexicalData,
    private readonly settings: LexicalSettings,
  ) {
    this.termIds = new Map(data.terms.map((term, id) => [term, id]));
    this.analyze = termProcessor(data.analysis);
  }

  static build(documents: Iterable<{ name: string; text: SearchableText }>, settings = DEFAULT_LEXICAL): LexicalIndex {
    const builder = new LexicalIndexBuilder(settings);
    for (const { name, text } of documents) builder.add(name, text);
    return builder.finish();
  }

  /**
   * The index as plain data to hand to another thread: its arrays can be transferred rather than copied, and the names
   * are left out (the receiver has them; `fromParts` takes them back). Cheaper than `serialize` + `deserialize`, which
   * copy every array twice on the way.
   */
  parts(): LexicalParts {
    const { names: _names, ...rest } = this.data;
    return rest;
  }

  /** An index from `parts()` and the names it was built over, in the same order; the arrays are used, not copied. */
  static fromParts(names: string[], parts: LexicalParts, settings = DEFAULT_LEXICAL): LexicalIndex {
    if (parts.fieldLengths.length !== names.length * FIELD_COUNT) throw new Error(`lexical index parts are for ${parts.fieldLengths.length / FIELD_COUNT} documents, not ${names.length}`);
    return new LexicalIndex({ ...parts, names }, settings);
  }

  /** @internal The builder's way in: an index over data it assembled. */
  static fromData(data: LexicalData, settings: LexicalSettings): LexicalIndex {
    return new LexicalIndex(data, settings);
  }

  /** Binary form for the index artifact: a JSON header (names, terms, averages) and the typed arrays, 4-byte aligned. */
  serialize(): Buffer {
    const { data } = this;
    const tfBytes = data.tfs.BYTES_PER_ELEMENT as 2 | 4;
    const header: SerialHeader = {
      format: FORMAT,
      fields: [...SEARCHABLE_FIELDS],
      analysis: data.analysis,
      names: data.names,
      terms: data.terms,
      averageFieldLengths: Array.from(data.averageFieldLengths),
      postings: data.docs.length,
      tfBytes,
    };
    const headerBytes = Buffer.from(JSON.stringify(header));
    const length = Buffer.alloc(4);
    length.writeUInt32LE(headerBytes.length);
    const parts: Buffer[] = [length, headerBytes, Buffer.alloc(pad4(4 + headerBytes.length))];
    for (const array of [data.postingStart, data.docs, data.tfs]) parts.push(bytesOf(array));
    parts.push(Buffer.alloc(pad4(data.tfs.byteLength)), bytesOf(data.fieldLengths));
    return Buffer.concat(parts);
  }

  static deserialize(bytes: Buffer, settings = DEFAULT_LEXICAL): LexicalIndex {
    const fail = (why: string) => new Error(`lexical index section: ${why}`);
    if (bytes.length < 4) throw fail('truncated');
    const headerLength = bytes.readUInt32LE(0);
    const header = JSON.parse(bytes.subarray(4, 4 + headerLength).toString('utf8')) as SerialHeader;
    if (header.format !== FORMAT) throw fail(`unknown format ${String(header.format)}`);
    if (header.fields.join() !== SEARCHABLE_FIELDS.join()) throw fail(`fields ${header.fields.join()} differ from ${SEARCHABLE_FIELDS.join()}`);
    let offset = 4 + headerLength + pad4(4 + headerLength);
    // Copies, not views: the artifact buffer's offsets need not be aligned for typed arrays.
    const take = <T>(Type: { new (buffer: ArrayBuffer): T; BYTES_PER_ELEMENT: number }, count: number): T => {
      const end = offset + count * Type.BYTES_PER_ELEMENT;
      if (end > bytes.length) throw fail('truncated');
      const copy = new Uint8Array(bytes.subarray(offset, end));
      offset = end;
      return new Type(copy.buffer);
    };
    const postingStart = take(Uint32Array, header.terms.length * FIELD_COUNT + 1);
    const docs = take(Uint32Array, header.postings);
    const tfs = header.tfBytes === 4 ? take(Uint32Array, header.postings) : take(Uint16Array, header.postings);
    offset += pad4(tfs.byteLength);
    const fieldLengths = take(Uint32Array, header.names.length * FIELD_COUNT);
    const data: LexicalData = {
      analysis: header.analysis,
      names: header.names,
      terms: header.terms,
      postingStart,
      docs,
      tfs,
      fieldLengths,
      averageFieldLengths: Float64Array.from(header.averageFieldLengths),
    };
    return new LexicalIndex(data, settings);
  }

  /**
   * Reads the MiniSearch JSON that index artifacts held before this engine (artifact format 1), so instances keep
   * serving an artifact built by an older worker until the next build replaces it.
   */
  static fromMiniSearchJSON(serialised: string, settings = DEFAULT_LEXICAL): LexicalIndex {
    const json = JSON.parse(serialised) as {
      documentIds: Record<string, string>;
      fieldIds: Record<string, number>;
      fieldLength: Record<string, number[]>;
      averageFieldLength: number[];
      index: [string, Record<string, Record<string, number>>][];
    };
    // MiniSearch enumerated documents by ascending short id; dense ids in that order keep its tie order.
    const shortIds = Object.keys(json.documentIds)
      .map(Number)
      .sort((a, b) => a - b);
    const dense = new Map(shortIds.map((id, doc) => [id, doc]));
    const names = shortIds.map((id) => json.documentIds[id]!);
    const fieldOf = SEARCHABLE_FIELDS.map((field) => {
      const id = json.fieldIds[field];
      if (id === undefined) throw new Error(`lexical index section: MiniSearch index lacks field ${field}`);
      return id;
    });
    const fieldLengths = new Uint32Array(names.length * FIELD_COUNT);
    shortIds.forEach((id, doc) => fieldOf.forEach((fieldId, field) => (fieldLengths[doc * FIELD_COUNT + field] = json.fieldLength[id]?.[fieldId] ?? 0)));
    const terms = json.index.map(([term]) => term);
    const postingStart = new Uint32Array(terms.length * FIELD_COUNT + 1);
    const docs: number[] = [];
    const tfs: number[] = [];
    json.index.forEach(([, byField], term) => {
      fieldOf.forEach((fieldId, field) => {
        const postings = Object.entries(byField[fieldId] ?? {})
          .map(([id, tf]) => [dense.get(Number(id)), tf] as const)
          .filter((posting): posting is readonly [number, number] => posting[0] !== undefined)
          .sort((a, b) => a[0] - b[0]);
        for (const [doc, tf] of postings) {
          docs.push(doc);
          tfs.push(tf);
        }
        postingStart[term * FIELD_COUNT + field + 1] = docs.length;
      });
    });
    const data: LexicalData = {
      // MiniSearch JSON does not record how its words were analysed; the loader's settings are the best guess.
      analysis: { stem: settings.stem, stopWords: settings.stopWords },
      names,
      terms,
      postingStart,
      docs: Uint32Array.from(docs),
      tfs: Uint32Array.from(tfs),
      fieldLengths,
      averageFieldLengths: Float64Array.from(fieldOf.map((fieldId) => json.averageFieldLength[fieldId] ?? 0)),
    };
    return new LexicalIndex(data, settings);
  }

  get size(): number {
    return this.data.names.length;
  }

  /** The indexed tools; a document's id, and its label in a LabelSet over this index, is its position here. */
  get names(): readonly string[] {
    return this.data.names;
  }

  /**
   * Best matches first; raw BM25 scores (unbounded, comparable only within one query). `accept`, when given, ranks
   * only the names it accepts (scores are unchanged: idf and lengths stay those of the whole catalog). `accept` may
   * instead be a label set over `names` (a keyed caller's, computed once): a byte lookup per candidate instead of a call,
   * which matters when few tools are visible and thousands of matches are tried before the top list fills.
   */
  search(query: string, limit: number, accept?: ((name: string) => boolean) | LabelSet): ScoredName[] {
    if (limit <= 0) return [];
    const words: string[] = [];
    for (const word of tokenize(query)) {
      const term = this.analyze(word);
      if (term) words.push(term);
    }
    if (words.length === 0) return [];
    const { docs, tfs, postingStart, names } = this.data;
    const norms = this.lengthNorms();
    const s = this.scratchSpace();
    const { k, d } = this.settings.bm25;
    const kPlus1 = k + 1;
    const documentCount = names.length;
    const boosts = SEARCHABLE_FIELDS.map((field) => this.settings.fieldWeights[field]);
    const queryStamp = s.nextQueryStamp();
    const counted = new Set<number>();
    let touchedCount = 0;
    // A word the catalog does not know weighs as much as the rarest known one: nothing here covers it.
    const unknownIdf = Math.log(1 + (documentCount + 0.5) / 0.5);
    let queryIdf = 0;
    for (const word of new Set(words)) {
      const term = this.termIds.get(word);
      if (term === undefined) {
        queryIdf += unknownIdf;
        continue;
      }
      let most = 0;
      for (let field = 0; field < FIELD_COUNT; field++) {
        const matching = postingStart[term * FIELD_COUNT + field + 1]! - postingStart[term * FIELD_COUNT + field]!;
        if (boosts[field] !== 0 && matching > 0) most = Math.max(most, Math.log(1 + (documentCount - matching + 0.5) / (matching + 0.5)));
      }
      s.termIdf.set(term, most);
      queryIdf += most;
    }
    // Query words are scored in order, repeats included (a repeated word counts twice in the score and once in the
    // matched-terms factor). Each word's per-field scores are summed first and then added to the document's total:
    // the same additions in the same order as MiniSearch, so scores, and ties, come out identical.
    for (const word of words) {
      const term = this.termIds.get(word);
      if (term === undefined) continue;
      const firstOccurrence = !counted.has(term);
      counted.add(term);
      const termStamp = s.nextTermStamp();
      let termTouched = 0;
      for (let field = 0; field < FIELD_COUNT; field++) {
        const boost = boosts[field]!;
        const start = postingStart[term * FIELD_COUNT + field]!;
        const end = postingStart[term * FIELD_COUNT + field + 1]!;
        if (boost === 0 || start === end) continue;
        const matching = end - start;
        const idf = Math.log(1 + (documentCount - matching + 0.5) / (matching + 0.5));
        for (let p = start; p < end; p++) {
          const doc = docs[p]!;
          const tf = tfs[p]!;
          const weighted = boost * (idf * (d + (tf * kPlus1) / (tf + norms[doc * FIELD_COUNT + field]!)));
          if (s.termStamps[doc] !== termStamp) {
            s.termStamps[doc] = termStamp;
            s.termScores[doc] = weighted;
            s.termTouched[termTouched++] = doc;
          } else {
            s.termScores[doc] = s.termScores[doc]! + weighted;
          }
        }
      }
      const termIdf = s.termIdf.get(term) ?? 0;
      for (let i = 0; i < termTouched; i++) {
        const doc = s.termTouched[i]!;
        if (s.queryStamps[doc] !== queryStamp) {
          s.queryStamps[doc] = queryStamp;
          s.scores[doc] = s.termScores[doc]!;
          s.matched[doc] = 1;
          s.matchedIdf[doc] = termIdf;
          s.touched[touchedCount++] = doc;
        } else {
          s.scores[doc] = s.scores[doc]! + s.termScores[doc]!;
          if (firstOccurrence) {
            s.matched[doc]!++;
            s.matchedIdf[doc] = s.matchedIdf[doc]! + termIdf;
          }
        }
      }
    }
    s.termIdf.clear();
    return this.top(s, touchedCount, limit, accept, queryIdf);
  }

  /**
   * The `limit` best of the matched documents by score × matched terms; among equal scores the document matched
   * first comes first (MiniSearch's stable sort over its result map). A partial insertion selection: at 100k tools a
   * common word matches ~15k documents, nearly all rejected by one comparison with the current cut-off.
   */
  private top(
    s: Scratch,
    touchedCount: number,
    limit: number,
    accept: ((name: string) => boolean) | LabelSet | undefined,
    queryIdf: number,
  ): ScoredName[] {
    const best = new TopK(limit);
    const { names } = this.data;
    const mask = accept instanceof LabelSet ? accept.mask : undefined;
    const acceptName = typeof accept === 'function' ? accept : undefined;
    for (let i = 0; i < touchedCount; i++) {
      const doc = s.touched[i]!;
      const score = s.scores[doc]! * s.matched[doc]!;
      // The filter runs only for documents that would enter the top list: a few dozen, not every match.
      if (best.admits(score) && (!mask || mask[doc] === 1) && (!acceptName || acceptName(names[doc]!))) best.offer(doc, score);
    }
    return best.ids.map((doc, i) => ({
      name: this.data.names[doc]!,
      score: best.scores[i]!,
      coverage: queryIdf > 0 ? Math.min(1, s.matchedIdf[doc]! / queryIdf) : 0,
    }));
  }

  private lengthNorms(): Float64Array {
    if (this.norms) return this.norms;
    const { k, b } = this.settings.bm25;
    const { fieldLengths, averageFieldLengths } = this.data;
    const norms = new Float64Array(fieldLengths.length);
    for (let i = 0; i < fieldLengths.length; i++) {
      norms[i] = k * (1 - b + (b * fieldLengths[i]!) / averageFieldLengths[i % FIELD_COUNT]!);
    }
    this.norms = norms;
    return norms;
  }

  private scratchSpace(): Scratch {
    this.scratch ??= new Scratch(this.data.names.length);
    return this.scratch;
  }
}

/**
 * Per-document working arrays for one query, reused across queries (search is synchronous, so one set per index is
 * enough). Stamps mark which entries belong to the current query or term, so nothing is cleared between queries.
 */
class Scratch {
  readonly scores: Float64Array;
  readonly termScores: Float64Array;
  readonly matched: Uint32Array;
  /** Idf of the distinct query terms each document matched (for `coverage`). */
  readonly matchedIdf: Float64Array;
  /** This query's terms → their idf (the largest over the fields searched). */
  readonly termIdf = new Map<number, number>();
  readonly queryStamps: Uint32Array;
  readonly termStamps: Uint32Array;
  readonly touched: Uint32Array;
  readonly termTouched: Uint32Array;
  private queryStamp = 0;
  private termStamp = 0;

  constructor(documents: number) {
    this.scores = new Float64Array(documents);
    this.termScores = new Float64Array(documents);
    this.matched = new Uint32Array(documents);
    this.matchedIdf = new Float64Array(documents);
    this.queryStamps = new Uint32Array(documents);
    this.termStamps = new Uint32Array(documents);
    this.touched = new Uint32Array(documents);
    this.termTouched = new Uint32Array(documents);
  }

  nextQueryStamp(): number {
    if (this.queryStamp === 0xffffffff) {
      this.queryStamps.fill(0);
      this.queryStamp = 0;
    }
    return ++this.queryStamp;
  }

  nextTermStamp(): number {
    if (this.termStamp === 0xffffffff) {
      this.termStamps.fill(0);
      this.termStamp = 0;
    }
    return ++this.termStamp;
  }
}

/** A Uint32 array that grows by doubling, for postings whose count is known only at the end. */
/**
 * Builds a LexicalIndex a document at a time, so a build can take a catalog's texts as they arrive and let each go once
 * it is counted: the postings grow in flat typed arrays and are sorted into compressed rows once, at `finish`.
 */
export class LexicalIndexBuilder {
  private readonly analysis: Analysis;
  // Catalogs repeat words endlessly; stemming each distinct word once is most of the saving over MiniSearch.
  private readonly analyze: (word: string) => string | null;
  private readonly termIds = new Map<string, number>();
  private readonly terms: string[] = [];
  private readonly names: string[] = [];
  private readonly seen = new Set<string>();
  /**
   * The postings in the order they were counted, document by document: each one's (term, field) key and term
   * frequency. The document is implied (`docEnd[doc]` is where its postings end), so it costs nothing per posting; term
   * frequencies take 16 bits until one needs more. At 100k tools: 4.7M postings, 6 bytes each instead of 12.
   */
  private readonly keys = new GrowableUint32();
  private tfs: GrowableUint16 | GrowableUint32 = new GrowableUint16();
  private readonly docEnd = new GrowableUint32();
  private readonly fieldLengths = new GrowableUint32();
  private readonly averageFieldLengths = new Float64Array(FIELD_COUNT);
  private readonly counts = new Map<number, number>();
  private maxTf = 0;

  constructor(private readonly settings: LexicalSettings = DEFAULT_LEXICAL) {
    this.analysis = { stem: settings.stem, stopWords: settings.stopWords };
    this.analyze = cachedProcessor(termProcessor(this.analysis));
  }

  /** Documents added so far. */
  get size(): number {
    return this.names.length;
  }

  add(name: string, text: SearchableText): void {
    const { seen, names, counts, termIds, terms, averageFieldLengths } = this;
    if (seen.has(name)) throw new Error(`duplicate tool name in the lexical index: ${name}`);
    seen.add(name);
    const doc = names.length;
    names.push(name);
    for (let field = 0; field < FIELD_COUNT; field++) {
      const words = tokenize(text[SEARCHABLE_FIELDS[field]!]);
      const length = new Set(words).size;
      this.fieldLengths.push(length);
      // A running mean, computed as MiniSearch did, so averages (and scores) agree to the last bit.
      averageFieldLengths[field] = (averageFieldLengths[field]! * doc + length) / (doc + 1);
      counts.clear();
      for (const word of words) {
        const term = this.analyze(word);
        if (!term) continue;
        let id = termIds.get(term);
        if (id === undefined) {
          id = terms.length;
          termIds.set(term, id);
          terms.push(term);
        }
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
      for (const [id, tf] of counts) {
        this.keys.push(id * FIELD_COUNT + field);
        if (tf > 0xffff && this.tfs instanceof GrowableUint16) this.tfs = GrowableUint32.from(this.tfs.view());
        this.tfs.push(tf);
        if (tf > this.maxTf) this.maxTf = tf;
      }
    }
    this.docEnd.push(this.keys.length);
  }

  finish(): LexicalIndex {
    const { terms, maxTf } = this;
    // Counting sort by (term, field); stable, so each posting list stays in document order.
    const postingStart = new Uint32Array(terms.length * FIELD_COUNT + 1);
    const keyArray = this.keys.view();
    for (let i = 0; i < keyArray.length; i++) postingStart[keyArray[i]! + 1]!++;
    for (let i = 1; i < postingStart.length; i++) postingStart[i]! += postingStart[i - 1]!;
    const next = postingStart.slice(0, -1);
    const sortedDocs = new Uint32Array(keyArray.length);
    const sortedTfs = maxTf > 0xffff ? new Uint32Array(keyArray.length) : new Uint16Array(keyArray.length);
    const docEnd = this.docEnd.view();
    const tfArray = this.tfs.view();
    for (let doc = 0, i = 0; doc < docEnd.length; doc++) {
      for (const end = docEnd[doc]!; i < end; i++) {
        const at = next[keyArray[i]!]!++;
        sortedDocs[at] = doc;
        sortedTfs[at] = tfArray[i]!;
      }
    }
    return LexicalIndex.fromData(
      {
        analysis: this.analysis,
        names: this.names,
        terms,
        postingStart,
        docs: sortedDocs,
        tfs: sortedTfs,
        fieldLengths: this.fieldLengths.view().slice(),
        averageFieldLengths: this.averageFieldLengths,
      },
      this.settings,
    );
  }
}

/** A typed array that grows by half again when full (doubling left up to half of a 100k-tool build's postings unused). */
class GrowableUint32 {
  private array = new Uint32Array(1024);
  length = 0;

  static from(values: ArrayLike<number>): GrowableUint32 {
    const grown = new GrowableUint32();
    grown.array = new Uint32Array(Math.max(1024, values.length * 1.5));
    grown.array.set(values);
    grown.length = values.length;
    return grown;
  }

  push(value: number): void {
    if (this.length === this.array.length) {
      const bigger = new Uint32Array(Math.ceil(this.array.length * 1.5));
      bigger.set(this.array);
      this.array = bigger;
    }
    this.array[this.length++] = value;
  }

  view(): Uint32Array {
    return this.array.subarray(0, this.length);
  }
}

/** GrowableUint32 for values under 2^16. */
class GrowableUint16 {
  private array = new Uint16Array(1024);
  length = 0;

  push(value: number): void {
    if (this.length === this.array.length) {
      const bigger = new Uint16Array(Math.ceil(this.array.length * 1.5));
      bigger.set(this.array);
      this.array = bigger;
    }
    this.array[this.length++] = value;
  }

  view(): Uint16Array {
    return this.array.subarray(0, this.length);
  }
}

function bytesOf(array: Uint32Array | Uint16Array): Buffer {
  return Buffer.from(array.buffer, array.byteOffset, array.byteLength);
}

function pad4(length: number): number {
  return (4 - (length % 4)) % 4;
}

/** How document and query words become index terms: stop words dropped, English words stemmed. */
export function termProcessor(analysis: Analysis): (word: string) => string | null {
  const stopWords = new Set(analysis.stopWords ? englishStopWords : []);
  return (word) => (stopWords.has(word) ? null : analysis.stem ? stemWord(word) : word);
}

function cachedProcessor(process: (word: string) => string | null): (word: string) => string | null {
  const cache = new Map<string, string | null>();
  return (word) => {
    let term = cache.get(word);
    if (term === undefined) {
      term = process(word);
      cache.set(word, term);
    }
    return term;
  };
}

/** Stems plain ASCII words only: the Porter rules are English, and mangle identifiers such as "s3" or "v2". */
function stemWord(term: string): string {
  return /^[a-z]{3,}$/.test(term) ? stemmer(term) : term;
}
