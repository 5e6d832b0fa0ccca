import type { Tool } from './types.js';

/**
 * Splits a programmer's identifier into lower-case words:
 * `Gmail_SendEmail` → gmail send email, `get-user` → get user, `getHTTPResponse` → get http response,
 * `fs.readFile` → fs read file. Digits stay attached to the word they follow (`base64Encode` → base64 encode)
 * because tokens such as `s3`, `ec2` or `v2` carry meaning only as a whole.
 */
export function splitIdentifier(identifier: string): string[] {
  return identifier
    .replace(/([\p{Ll}\p{N}])(\p{Lu})/gu, '$1 $2') // camelCase boundary
    .replace(/(\p{Lu}+)(\p{Lu}\p{Ll})/gu, '$1 $2') // acronym followed by a word: HTTPResponse
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word.length > 0)
    .map((word) => word.toLowerCase());
}

// Scripts written without spaces between words; they are indexed as overlapping character pairs (as Lucene's CJK
// analyzer does) so a query can match part of a sentence.
const UNSPACED_SCRIPT = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;

/** Runs of letters and digits: the chunks identifiers and prose are made of before camelCase splitting. */
const CHUNK = /[\p{L}\p{N}]+/gu;

/**
 * Tokenises free text and identifiers alike, so a query word matches the same word inside a tool name.
 * Single ASCII characters are dropped: they are almost always split-off noise ("e-mail" → e, "it's" → s).
 *
 * A camelCase word is kept whole as well as split (`GitHub` → github, git, hub; `sendEmail` → sendemail, send, email):
 * split alone, a brand name typed with capitals ("trending on GitHub") met every tool that mentions `git`, while the
 * same word typed in lower case matched only GitHub's tools (issue 42). The whole form comes first, so both spellings
 * share their rarest term.
 */
export function tokenize(text: string): string[] {
  const tokens: string[] = [];
  for (const [chunk] of text.matchAll(CHUNK)) {
    let words = chunkWords.get(chunk);
    if (words === undefined) {
      words = [];
      const parts = splitIdentifier(chunk);
      if (parts.length > 1 && !UNSPACED_SCRIPT.test(chunk)) pushWord(chunk.toLowerCase(), words);
      for (const word of parts) pushWord(word, words);
      if (chunkWords.size >= CHUNK_CACHE) chunkWords.clear();
      chunkWords.set(chunk, words);
    }
    for (const word of words) tokens.push(word);
  }
  return tokens;
}

/**
 * Distinct chunks remembered with their words. A catalog repeats the same few hundred thousand chunks endlessly, and
 * splitting one (three Unicode regexes) was most of BM25's build time at 100k tools; the words are the same each time.
 */
const CHUNK_CACHE = 200_000;
const chunkWords = new Map<string, string[]>();

function pushWord(word: string, tokens: string[]): void {
  if (UNSPACED_SCRIPT.test(word)) {
    pushCharacterPairs(word, tokens);
  } else if (word.length > 1 || !/^[a-z0-9]$/.test(word)) {
    tokens.push(word);
  }
}

function pushCharacterPairs(word: string, tokens: string[]): void {
  const chars = Array.from(word);
  if (chars.length === 1) {
    tokens.push(word);
    return;
  }
  for (let i = 0; i + 1 < chars.length; i++) tokens.push(chars[i]! + chars[i + 1]!);
}

/** The text fields of a tool that search sees, each already normalised into space-separated words. */
export interface SearchableText {
  name: string;
  title: string;
  description: string;
  server: string;
  params: string;
  /** What the tool's source (its MCP server, or a static source) says of itself: the same text on each of its tools. */
  context: string;
}

export const SEARCHABLE_FIELDS = ['name', 'title', 'description', 'server', 'params', 'context'] as const;
export type SearchableField = (typeof SEARCHABLE_FIELDS)[number];

/** The tool a SearchableText derives its long fields from. Not enumerable: copies (spread, JSON, postMessage) leave it. */
const TOOL = Symbol('tool');
type DerivedText = SearchableText & { readonly [TOOL]: Tool };

/**
 * `description` and `params` are read from the tool each time instead of kept: they are the long fields (with `params`
 * ~450 characters a tool, both were about 90 MB of a 100,000-tool catalog, issue 55), read only when an index is built
 * or a few candidates are reranked. They are own enumerable getters (one shared function each, so every text shares
 * one shape): spread, JSON.stringify and postMessage to the index worker see six plain strings.
 */
const DERIVED_FIELDS: PropertyDescriptorMap = {
  description: {
    enumerable: true,
    get(this: DerivedText): string {
      return descriptionText(this[TOOL]);
    },
  },
  params: {
    enumerable: true,
    get(this: DerivedText): string {
      return paramsText(this[TOOL]);
    },
  },
};

/**
 * Builds the searchable text of a tool. The qualified name's server prefix is indexed as the server field, not
 * as part of the name, so "github" in a query does not outweigh what the tool does. The tool must not change after.
 */
export function searchableText(tool: Tool, server?: string, separator = '__', context = ''): SearchableText {
  const bareName =
    server !== undefined && separator !== '' && tool.name.startsWith(server + separator)
      ? tool.name.slice(server.length + separator.length)
      : tool.name;
  const text = {
    name: identifierWords(bareName),
    title: normaliseSpace(tool.title ?? tool.annotations?.title ?? ''),
    server: server === undefined ? '' : serverWords(server),
    context: normaliseSpace(context),
  };
  Object.defineProperty(text, TOOL, { value: tool });
  return Object.defineProperties(text, DERIVED_FIELDS) as DerivedText;
}

function descriptionText(tool: Tool): string {
  // Tags (`_meta.tags`, e.g. set by a tool transform) are searchable as part of the description.
  return normaliseSpace([tool.description ?? '', ...tagsOf(tool)].join(' '));
}

function paramsText(tool: Tool): string {
  const paramParts: string[] = [];
  for (const [paramName, schema] of Object.entries(tool.inputSchema.properties ?? {})) {
    paramParts.push(paramWords(paramName));
    if (schema && typeof schema === 'object' && typeof schema.description === 'string') {
      paramParts.push(normaliseSpace(schema.description));
    }
  }
  return paramParts.join(' ; ');
}

/** `splitIdentifier` as one string; the identifier itself when that is what it gives (a lower-case word), not a copy. */
function identifierWords(identifier: string): string {
  const words = splitIdentifier(identifier).join(' ');
  return words === identifier ? identifier : words;
}

/**
 * Parameter names' words, remembered: `params` is derived on every read (twice per index build), and splitting the
 * names was most of its cost, while a catalog's tools share most of their parameter names (`owner`, `page_token`).
 */
const paramWordsCache = new Map<string, string>();
const PARAM_WORDS_CACHED = 10_000;

function paramWords(paramName: string): string {
  let words = paramWordsCache.get(paramName);
  if (words === undefined) {
    if (paramWordsCache.size >= PARAM_WORDS_CACHED) paramWordsCache.clear();
    words = identifierWords(paramName);
    paramWordsCache.set(paramName, words);
  }
  return words;
}

/** The last server's words: a source's tools come one after another, and each would otherwise get its own copy. */
let lastServer: { server: string; words: string } | undefined;

function serverWords(server: string): string {
  if (lastServer?.server !== server) lastServer = { server, words: identifierWords(server) };
  return lastServer.words;
}

/**
 * One string for the embedder: the fields in order of how much they say about the tool's purpose, the source's
 * description last (it lifted hybrid above BM25 alone on LiveMCPBench, where the vector signal alone lost by it:
 * BENCHMARKS.md, "Server context").
 */
export function embeddingText(text: SearchableText): string {
  return [text.name, text.title, text.description, text.params, text.server, text.context]
    .filter((part) => part.length > 0)
    .join(' . ');
}

/**
 * The canonical form hashed into the catalog hash: every searchable field, in a fixed order, with field labels so
 * moving words between fields also changes the hash.
 */
export function canonicalText(name: string, text: SearchableText): string {
  return [`name=${name}`, ...SEARCHABLE_FIELDS.map((field) => `${field}=${text[field]}`)].join('\n');
}

function tagsOf(tool: Tool): string[] {
  const tags = tool._meta?.tags;
  return Array.isArray(tags) ? tags.filter((tag): tag is string => typeof tag === 'string') : [];
}

/** Whitespace other than single spaces: what `normaliseSpace` has to replace. */
const IRREGULAR_SPACE = /[^\S ]| {2}/;

/**
 * Most texts are already normal; those are returned as they are (trimmed), which shares the string with the tool
 * definition instead of keeping a second copy of every description in the catalog (tens of MB at 100k tools).
 */
function normaliseSpace(text: string): string {
  return (IRREGULAR_SPACE.test(text) ? text.replace(/\s+/g, ' ') : text).trim();
}
