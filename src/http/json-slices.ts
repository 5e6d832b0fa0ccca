/**
 * JSON.parse for large request bodies (a 100,000-tool catalog is ~100 MB) with the event loop handed back every few
 * milliseconds: one JSON.parse of such a body (plus the depth check before it) held the thread for over a second, and
 * with it every other request, `/v1/index/status` and `/health` included. The bytes are scanned a slice at a time
 * (the depth check of json-depth.ts, done in the same pass); each array that is the value of a top-level key is cut at
 * its own commas into groups of about GROUP_BYTES, parsed a group per turn of the loop; the rest (the "skeleton", with
 * those arrays left empty) is parsed once. The result equals JSON.parse's; malformed JSON fails as body-parser's does.
 */
import { setImmediate as yieldLoop } from 'node:timers/promises';
import { JsonTooDeepError } from './json-depth.js';

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;

/** Bytes scanned per turn of the event loop. */
const SCAN_BYTES = 2 << 20;
/** About how many bytes of array elements one JSON.parse takes (a few ms). */
const GROUP_BYTES = 256 << 10;

/** body-parser's shape for malformed JSON, so the error handler answers it as `invalid_json` (400). */
export class JsonParseError extends Error {
  override readonly name = 'JsonParseError';
  readonly status = 400;
  readonly type = 'entity.parse.failed';
}

interface TopArray {
  /** The key's quoted text (start and end, inclusive of the quotes). */
  keyStart: number;
  keyEnd: number;
  open: number;
  close: number;
  /** Positions of the commas the elements are cut at. */
  cuts: number[];
}

/** Parses UTF-8 JSON text; throws JsonTooDeepError (deeper than `maxDepth`) or JsonParseError. */
export async function parseJsonInSlices(bytes: Buffer, maxDepth: number): Promise<unknown> {
  const arrays: TopArray[] = [];
  let depth = 0;
  let inString = false;
  let stringStart = -1;
  // Inside the top-level object: the last key read, and whether the next string is a key.
  let topObject = false;
  let expectKey = false;
  let keyStart = -1;
  let keyEnd = -1;
  let current: TopArray | undefined;
  let groupStart = 0;
  let first = true;
  for (let sliceStart = 0; sliceStart < bytes.length; sliceStart += SCAN_BYTES) {
    if (sliceStart > 0) await yieldLoop();
    const sliceEnd = Math.min(bytes.length, sliceStart + SCAN_BYTES);
    for (let i = sliceStart; i < sliceEnd; i++) {
      const byte = bytes[i];
      if (inString) {
        if (byte === BACKSLASH) i++;
        else if (byte === QUOTE) {
          inString = false;
          if (depth === 1 && topObject && expectKey) {
            keyStart = stringStart;
            keyEnd = i;
            expectKey = false;
          }
        }
        continue;
      }
      if (byte === QUOTE) {
        inString = true;
        stringStart = i;
      } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
        if (++depth > maxDepth) throw new JsonTooDeepError(maxDepth);
        if (depth === 1 && first) {
          topObject = byte === OPEN_BRACE;
          expectKey = topObject;
        } else if (depth === 2 && topObject && byte === OPEN_BRACKET && keyStart >= 0) {
          current = { keyStart, keyEnd, open: i, close: -1, cuts: [] };
          groupStart = i;
        }
        first = false;
      } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
        if (depth === 2 && current) {
          current.close = i;
          arrays.push(current);
          current = undefined;
        }
        depth--;
      } else if (byte === COMMA) {
        if (depth === 1 && topObject) {
          expectKey = true;
          keyStart = -1;
        } else if (depth === 2 && current && i - groupStart >= GROUP_BYTES) {
          current.cuts.push(i);
          groupStart = i;
        }
      } else if (byte === COLON && depth === 1) {
        expectKey = false;
      } else if (first && byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09) {
        first = false;
      }
    }
  }
  const big = arrays.filter((array) => array.cuts.length > 0);
  try {
    if (big.length === 0) return JSON.parse(bytes.toString('utf8'));
    // The skeleton: the text with each big array emptied.
    const parts: string[] = [];
    let at = 0;
    for (const array of big) {
      parts.push(bytes.toString('utf8', at, array.open + 1));
      at = array.close;
    }
    parts.push(bytes.toString('utf8', at));
    const skeleton = JSON.parse(parts.join('')) as Record<string, unknown>;
    for (const array of big) {
      const elements: unknown[] = [];
      const bounds = [array.open, ...array.cuts, array.close];
      for (let g = 0; g + 1 < bounds.length; g++) {
        await yieldLoop();
        const text = bytes.toString('utf8', bounds[g]! + 1, bounds[g + 1]!);
        // A group of whitespace only would parse as [] where the whole text has a stray comma.
        if (text.trim() === '') throw new SyntaxError(`Unexpected token ',' in JSON at position ${bounds[g + 1]}`);
        for (const element of JSON.parse(`[${text}]`) as unknown[]) elements.push(element);
      }
      const key = JSON.parse(bytes.toString('utf8', array.keyStart, array.keyEnd + 1)) as string;
      // The last of duplicate keys wins, as with JSON.parse: only a key the skeleton holds as this emptied array.
      const held = Object.getOwnPropertyDescriptor(skeleton, key)?.value as unknown;
      if (Array.isArray(held) && held.length === 0) {
        // defineProperty, not assignment: a "__proto__" key stays an own property, as JSON.parse makes it.
        Object.defineProperty(skeleton, key, { value: elements, enumerable: true, writable: true, configurable: true });
      }
    }
    return skeleton;
  } catch (error) {
    if (error instanceof SyntaxError) throw new JsonParseError(error.message);
    throw error;
  }
}
