/**
 * Nesting depth of JSON text, measured on the raw bytes before JSON.parse: a body nested thousands of levels deep
 * parses fine but breaks every recursive step after it (schema checks, JSON.stringify of a stored key or tool), so it
 * must be refused before anything is done with it. One linear pass, no allocation; stops at the first level too deep.
 */
export class JsonTooDeepError extends Error {
  override readonly name = 'JsonTooDeepError';
  /** body-parser keeps a thrown error's status and type, so the error handler can tell it from other 400s. */
  readonly status = 400;
  readonly type = 'entity.too.deep';

  constructor(readonly maxDepth: number) {
    super(`JSON nesting is deeper than ${maxDepth} levels (limits.jsonDepth)`);
  }
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** True when `bytes` (UTF-8 JSON text, valid or not) nests arrays/objects deeper than `maxDepth`. */
export function jsonDeeperThan(bytes: Uint8Array, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) {
      inString = true;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > maxDepth) return true;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/** Throws JsonTooDeepError (status 400) when the body nests too deep; for raw-body routes that parse JSON themselves. */
export function assertJsonDepth(bytes: Uint8Array, maxDepth: number): void {
  if (jsonDeeperThan(bytes, maxDepth)) throw new JsonTooDeepError(maxDepth);
}

