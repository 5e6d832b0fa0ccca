/**
 * A fast path for BERT-style tokenizers (BertNormalizer with lowercase, BertPreTokenizer, WordPiece, no
 * post-processor): a text's words found in one pass over its characters, where tokenizers.js normalises the whole text
 * in five passes (clean_text, Chinese characters, lowercase, NFD, accent stripping, each one regex test or array per
 * character) and pre-tokenises with a Unicode regex: most of the offline model's embedding time.
 *
 * What each character turns into is not written down here but asked of the library's own normaliser and
 * pre-tokeniser, one character at a time (and remembered): it is dropped (controls), separates words (whitespace),
 * stands alone (punctuation, CJK ideographs), or is part of a word as some normalised string ('É' -> 'e'). That is
 * exact for a whole text because both steps work character by character, with two exceptions the path refuses: the
 * lowercasing of Σ depends on its neighbours (Final_Sigma, the only such rule of String.prototype.toLowerCase), and NFD
 * reorders combining marks, which is invisible only when accent stripping removes every mark (characters that leave
 * an Mc or Me mark are refused). Texts holding an added token's content ([CLS], [UNK], ...) are refused too, as the
 * library matches those on the raw text first. Refused texts go through the library as before.
 */
import type { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';

/** The tokenizer.json fields the fast path checks. */
export interface TokenizerJson {
  normalizer?: { type?: string; lowercase?: boolean } | null;
  pre_tokenizer?: { type?: string } | null;
  post_processor?: unknown;
  model?: { type?: string; fuse_unk?: boolean };
  added_tokens?: Array<{ content: string; special?: boolean; normalized?: boolean }>;
}

/** tokenizer_config.json settings that make the library alter a text before normalising it. */
export interface TokenizerConfigJson {
  remove_space?: boolean;
  do_lowercase_and_remove_accent?: boolean;
}

/** What a character becomes (0: not asked yet): see the module comment. */
const WORD = 1;
const SPACE = 2;
const ALONE = 3;
const DROPPED = 4;
const REFUSED = 5;

const GREEK_CAPITAL_SIGMA = 0x3a3;
/** Distinct words remembered (as memoizeWordPiece): a catalog's vocabulary is far smaller. */
const WORD_CACHE = 200_000;
const NON_SPACING_LEFT = /[\p{Mc}\p{Me}]/u;

/** The token ids of a text, or undefined for a text the fast path refuses (the library must encode it). */
export type WordPieceIds = (text: string) => number[] | undefined;

/**
 * The fast path for this tokenizer, or undefined when its tokenizer.json is not of the BERT shape (the library then
 * encodes every text). The WordPiece model's `encode` is looked up on each call, so a wrapper installed later
 * (memoizeWordPiece) is used, and unknown words, `##` pieces and the 100-character limit stay the library's.
 */
export function bertWordPieceIds(tokenizer: HfTokenizer, json: TokenizerJson, config: TokenizerConfigJson): WordPieceIds | undefined {
  const { normalizer, pre_tokenizer: preTokenizer, model } = tokenizer;
  const added = json.added_tokens ?? [];
  if (
    json.normalizer?.type !== 'BertNormalizer' ||
    json.normalizer.lowercase !== true ||
    json.pre_tokenizer?.type !== 'BertPreTokenizer' ||
    json.model?.type !== 'WordPiece' ||
    json.model.fuse_unk === true ||
    (json.post_processor !== null && json.post_processor !== undefined) ||
    config.remove_space === true ||
    config.do_lowercase_and_remove_accent === true ||
    !normalizer ||
    !preTokenizer ||
    !model ||
    // A normalised added token is also matched after normalisation, and one that is its own lowercase could be a whole
    // normalised text, which the library maps to the added token's id: neither is worth handling here.
    added.some((token) => (token.normalized ?? !token.special) || token.content.toLowerCase() === token.content)
  ) {
    return undefined;
  }

  const kinds = new Uint8Array(0x10000);
  const normalisedOf = new Map<number, string>();
  const astralKinds = new Map<number, number>();
  const classify = (codePoint: number): number => {
    const char = String.fromCodePoint(codePoint);
    const normalised = normalizer(char);
    let kind: number;
    if (codePoint === GREEK_CAPITAL_SIGMA || NON_SPACING_LEFT.test(normalised)) kind = REFUSED;
    else if (normalised === '') kind = DROPPED;
    else {
      // Between two letters the pre-tokeniser shows whether the character joins them, separates them, or stands alone.
      const pieces = preTokenizer.pre_tokenize_text(`a${normalised}a`);
      const alone = normalised.trim();
      if (pieces.length === 1 && pieces[0] === `a${normalised}a`) kind = WORD;
      else if (pieces.length === 2 && pieces[0] === 'a' && pieces[1] === 'a') kind = SPACE;
      else if (pieces.length === 3 && pieces[0] === 'a' && pieces[1] === alone && pieces[2] === 'a') kind = ALONE;
      else kind = REFUSED;
      if (kind === WORD) normalisedOf.set(codePoint, normalised);
      else if (kind === ALONE) normalisedOf.set(codePoint, alone);
    }
    if (codePoint < 0x10000) kinds[codePoint] = kind;
    else astralKinds.set(codePoint, kind);
    return kind;
  };
  // ASCII word characters are lowercased a run at a time with toLowerCase, which must be what the normaliser does.
  for (let code = 0; code < 0x80; code++) {
    const kind = classify(code);
    if (kind === REFUSED || (kind === WORD && normalisedOf.get(code) !== String.fromCharCode(code).toLowerCase())) return undefined;
  }

  // Added tokens starting with an ASCII character are looked for where the scan meets that character; others (none
  // in BERT vocabularies) with a search of the whole text.
  const addedByFirst = new Map<number, string[]>();
  const addedElsewhere: string[] = [];
  for (const { content } of added) {
    const first = content.charCodeAt(0);
    if (content.length > 0 && first < 0x80) addedByFirst.set(first, [...(addedByFirst.get(first) ?? []), content]);
    else addedElsewhere.push(content);
  }
  const startsAdded = new Uint8Array(0x80);
  for (const first of addedByFirst.keys()) startsAdded[first] = 1;

  const tokensToIds = model.tokens_to_ids;
  const unkId = model.unk_token_id!;
  /**
   * Each word's ids, remembered: WordPiece splits every word on its own, so a word's ids never depend on the text,
   * and a catalog repeats the same few thousand words. Kept here rather than only as pieces (memoizeWordPiece) to
   * spare a vocabulary lookup per token.
   */
  const idsOfWord = new Map<string, number[]>();
  const addWord = (word: string, ids: number[]): void => {
    let known = idsOfWord.get(word);
    if (known === undefined) {
      // As Tokenizer.encode maps tokens to ids (added tokens' contents are in tokens_to_ids, with their ids).
      const tokens: string[] = model.encode([word]);
      known = tokens.map((token) => tokensToIds.get(token) ?? unkId);
      if (idsOfWord.size >= WORD_CACHE) idsOfWord.clear();
      idsOfWord.set(word, known);
    }
    for (let k = 0; k < known.length; k++) ids.push(known[k]!);
  };

  return (text) => {
    for (const content of addedElsewhere) if (text.includes(content)) return undefined;
    const ids: number[] = [];
    // The current word: `pending` (normalised) followed by the raw ASCII run text[run, i), lowercased when it ends.
    let pending = '';
    let run = -1;
    for (let i = 0; i < text.length; ) {
      const code = text.charCodeAt(i);
      let kind: number;
      let width = 1;
      let codePoint = code;
      if (code < 0x80) {
        if (startsAdded[code] === 1 && addedByFirst.get(code)!.some((content) => text.startsWith(content, i))) return undefined;
        kind = kinds[code]!;
        if (kind === WORD) {
          if (run < 0) run = i;
          i += 1;
          continue;
        }
      } else {
        codePoint = text.codePointAt(i)!;
        if (codePoint >= 0x10000) {
          width = 2;
          kind = astralKinds.get(codePoint) ?? classify(codePoint);
        } else {
          kind = kinds[codePoint]! || classify(codePoint);
        }
      }
      if (kind === REFUSED) return undefined;
      if (run >= 0) {
        pending += text.slice(run, i).toLowerCase();
        run = -1;
      }
      i += width;
      // A dropped character is removed before pre-tokenising, so the letters on either side form one word.
      if (kind === DROPPED) continue;
      if (kind === WORD) {
        pending += normalisedOf.get(codePoint)!;
        continue;
      }
      if (pending !== '') addWord(pending, ids);
      pending = '';
      if (kind === ALONE) addWord(normalisedOf.get(codePoint)!, ids);
    }
    if (run >= 0) pending += text.slice(run).toLowerCase();
    if (pending !== '') addWord(pending, ids);
    return ids;
  };
}
