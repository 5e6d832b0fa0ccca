import { RE2JS } from 're2js';

/**
 * The one regular-expression engine for patterns toolrouter did not write (schema `pattern`s, `regex:` queries):
 * RE2 semantics in pure JavaScript (re2js), so matching is linear in the input and nothing is compiled or
 * downloaded at install time. A pattern RE2 cannot run (lookaround, backreferences) fails to compile.
 */
export type LinearRegex = RE2JS;

export interface LinearRegexOptions {
  ignoreCase?: boolean;
  /** `^` and `$` also match at line edges. */
  multiline?: boolean;
}

/** Compiles `pattern` with RE2 syntax (plus the JavaScript escapes below); throws a SyntaxError-like error when invalid. */
export function compileLinear(pattern: string, options: LinearRegexOptions = {}): LinearRegex {
  const flags = (options.ignoreCase ? RE2JS.CASE_INSENSITIVE : 0) | (options.multiline ? RE2JS.MULTILINE : 0);
  return RE2JS.compile(fromJavaScriptEscapes(pattern), flags);
}

/**
 * JSON Schema patterns are ECMA-262 regular expressions, where `\u00e9` and `\u{1F600}` are common (RE2 spells them
 * `\x{e9}`); the previous engine (node-re2) accepted them, so schemas published with them keep working. Everything
 * else is passed through for RE2 to accept or refuse.
 */
export function fromJavaScriptEscapes(pattern: string): string {
  if (!pattern.includes('\\u')) return pattern;
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i]!;
    if (char !== '\\') {
      out += char;
      continue;
    }
    const next = pattern[i + 1];
    if (next === 'u') {
      const four = /^[0-9a-fA-F]{4}/.exec(pattern.slice(i + 2, i + 6));
      const braced = /^\{([0-9a-fA-F]{1,6})\}/.exec(pattern.slice(i + 2, i + 10));
      if (four) {
        out += `\\x{${four[0]}}`;
        i += 5;
        continue;
      }
      if (braced) {
        out += `\\x{${braced[1]}}`;
        i += 1 + braced[0].length;
        continue;
      }
    }
    // Any other escape, `\\` included, is copied whole so its second character is never read as an escape start.
    out += char + (next ?? '');
    i += 1;
  }
  return out;
}

/**
 * An ajv `code.regExp` engine: ajv calls it with a schema's `pattern` and flags ("u") and only ever uses `test`.
 * Unanchored search, as ECMA-262 `pattern` requires.
 */
export function ajvLinearRegExp(pattern: string, _flags: string): { test(value: string): boolean } {
  const compiled = compileLinear(pattern);
  return { test: (value: string) => compiled.test(value) };
}
// ajv reads `.code` only for standalone code generation, which toolrouter does not use; it names the same engine.
ajvLinearRegExp.code = 'require("re2js").RE2JS.compile';
