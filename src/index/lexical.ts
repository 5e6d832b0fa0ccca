import MiniSearch, { type AsPlainObject } from 'minisearch';
import { stemmer } from 'stemmer';
import { eng as englishStopWords } from 'stopword';
import { SEARCHABLE_FIELDS, tokenize, type SearchableField, type SearchableText } from '../catalog/text.js';

/** Relative weight of each searchable field in BM25 scoring. */
export type FieldWeights = Record<SearchableField, number>;

export interface LexicalSettings {
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
  fieldWeights: { name: 3, title: 2, description: 1, server: 1, params: 0.5 },
  bm25: { k: 1.5, b: 0.75, d: 0 },
  stem: true,
  stopWords: true,
};

export interface ScoredName {
  name: string;
  score: number;
}

interface LexicalDocument extends SearchableText {
  id: string;
}

/**
 * BM25 over the tool's searchable fields. MiniSearch does the indexing (BM25+ with per-field length normalisation and
 * a serialisable index); this class pins its tokenisation to the catalog's, so query and document words agree.
 */
export class LexicalIndex {
  private constructor(
    private readonly engine: MiniSearch<LexicalDocument>,
    private readonly settings: LexicalSettings,
  ) {}

  static build(documents: Iterable<{ name: string; text: SearchableText }>, settings = DEFAULT_LEXICAL): LexicalIndex {
    const engine = new MiniSearch<LexicalDocument>(engineOptions(settings));
    const batch: LexicalDocument[] = [];
    for (const document of documents) batch.push({ id: document.name, ...document.text });
    engine.addAll(batch);
    return new LexicalIndex(engine, settings);
  }

  static fromJSON(serialised: string, settings = DEFAULT_LEXICAL): LexicalIndex {
    return new LexicalIndex(MiniSearch.loadJSON<LexicalDocument>(serialised, engineOptions(settings)), settings);
  }

  toJSON(): AsPlainObject {
    return this.engine.toJSON();
  }

  get size(): number {
    return this.engine.documentCount;
  }

  /** Best matches first; raw BM25 scores (unbounded, comparable only within one query). */
  search(query: string, limit: number): ScoredName[] {
    const options = { boost: this.settings.fieldWeights, bm25: this.settings.bm25 };
    const internals = this.engine as unknown as MiniSearchInternals;
    if (typeof internals.executeQuery === 'function' && internals._documentIds instanceof Map) {
      return topMatches(internals.executeQuery(query, options), internals._documentIds, limit);
    }
    const results: ScoredName[] = [];
    for (const hit of this.engine.search(query, options)) {
      if (results.length >= limit) break;
      results.push({ name: String(hit.id), score: hit.score });
    }
    return results;
  }
}

/**
 * The parts of MiniSearch 7 that `search()` is built from. `search()` turns every match into a result object and sorts
 * them all; in a 100k-tool catalog a query matches ~15k tools, which made that half the BM25 time. Scoring here is
 * exactly `search()`'s (raw score × number of matched query terms, ties in match order), with only the top `limit`
 * selected. When a MiniSearch update changes these internals, search falls back to the public `search()`.
 */
interface MiniSearchInternals {
  executeQuery(query: string, options: object): Map<number, { score: number; terms: string[] }>;
  _documentIds: Map<number, unknown>;
}

function topMatches(raw: Map<number, { score: number; terms: string[] }>, ids: Map<number, unknown>, limit: number): ScoredName[] {
  // Partial insertion selection: a new score goes after equal ones, as MiniSearch's stable sort keeps match order.
  const best: { doc: number; score: number }[] = [];
  if (limit <= 0) return [];
  for (const [doc, { score, terms }] of raw) {
    const scored = score * (terms.length || 1);
    if (best.length === limit && !(scored > best[limit - 1]!.score)) continue;
    let position = best.length;
    while (position > 0 && best[position - 1]!.score < scored) position--;
    best.splice(position, 0, { doc, score: scored });
    if (best.length > limit) best.pop();
  }
  return best.map(({ doc, score }) => ({ name: String(ids.get(doc)), score }));
}

function engineOptions(settings: LexicalSettings) {
  return {
    idField: 'id',
    fields: [...SEARCHABLE_FIELDS],
    storeFields: [],
    tokenize: (text: string) => tokenize(text),
    // tokenize() already lower-cases and splits identifiers; only stemming is left to do.
    processTerm: termProcessor(settings),
    searchOptions: { combineWith: 'OR' as const, prefix: false, fuzzy: false, boost: settings.fieldWeights, bm25: settings.bm25 },
  };
}

function termProcessor(settings: LexicalSettings): (term: string) => string | null {
  const stopWords = new Set(settings.stopWords ? englishStopWords : []);
  return (term) => (stopWords.has(term) ? null : settings.stem ? stemWord(term) : term);
}

/** Stems plain ASCII words only: the Porter rules are English, and mangle identifiers such as "s3" or "v2". */
function stemWord(term: string): string {
  return /^[a-z]{3,}$/.test(term) ? stemmer(term) : term;
}
