/**
 * How deep a JSON text nests, read without parsing it: JSON.parse, zod and the MCP SDK all recurse, so a value nested
 * thousands deep overflows their stacks far from where it came in. Code mode measures what crosses its bridge (call
 * arguments, the return value) with this before anything parses it.
 */

/** The deepest nesting of objects and arrays in `text` (0 for a scalar). Strings are skipped, escapes included. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (inString) {
      if (char === 0x5c /* \ */) i++;
      else if (char === 0x22 /* " */) inString = false;
    } else if (char === 0x22) {
      inString = true;
    } else if (char === 0x7b /* { */ || char === 0x5b /* [ */) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (char === 0x7d /* } */ || char === 0x5d /* ] */) {
      depth--;
    }
  }
  return deepest;
}

/** `text` cut to at most `max` characters, saying how long it was: a message is shortened, never emptied. */
export function truncated(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters, cut)`;
}
