/**
 * The JSDoc comments of the configuration's settings, read from the sources with the TypeScript parser: the house style
 * documents each setting where its zod schema is declared (src/<module>/settings.ts), and this walk follows
 * `configSchema` through the slices (z.object shapes, records, arrays, unions, wrappers, the variables and functions
 * that build them) to give each comment its setting's path. `npm run docs:config` writes the result to
 * src/config/setting-descriptions.ts, which the JSON Schema and the reference page read; run as a script:
 * `node --import tsx test/helpers/settings-jsdoc.ts` (re)writes that file.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { REPO_ROOT } from './paths.js';

const SOURCE = path.join(REPO_ROOT, 'src');
export const DESCRIPTIONS_FILE = 'src/config/setting-descriptions.ts';

interface Declaration {
  file: string;
  /** The schema expression (a const's initializer, or what a function returns). */
  expression: ts.Expression;
  doc: string | undefined;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return tsFiles(full);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The comment text of a node's JSDoc (tags such as @defaultValue left out), one line. */
function jsDocOf(node: ts.Node): string | undefined {
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc);
  const text = docs.map((doc) => ts.getTextOfJSDocComment(doc.comment) ?? '').join(' ').replace(/\s+/g, ' ').trim();
  return text || undefined;
}

/** Top-level consts and functions of every source file, by name (a name declared twice keeps each file's own). */
function declarations(): Map<string, Declaration[]> {
  const found = new Map<string, Declaration[]>();
  const add = (name: string, declaration: Declaration) => found.set(name, [...(found.get(name) ?? []), declaration]);
  for (const file of tsFiles(SOURCE)) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    for (const statement of source.statements) {
      if (ts.isVariableStatement(statement)) {
        for (const declaration of statement.declarationList.declarations) {
          if (ts.isIdentifier(declaration.name) && declaration.initializer) add(declaration.name.text, { file, expression: declaration.initializer, doc: jsDocOf(statement) });
        }
      } else if (ts.isFunctionDeclaration(statement) && statement.name && statement.body) {
        const returned = statement.body.statements.find(ts.isReturnStatement)?.expression;
        if (returned) add(statement.name.text, { file, expression: returned, doc: jsDocOf(statement) });
      }
    }
  }
  return found;
}

/** Every documented setting of `configSchema`, `path → comment` (records as `<name>`, array items as `[]`). */
export function settingDescriptions(): Record<string, string> {
  const known = declarations();
  const out: Record<string, string> = {};
  const note = (at: string[], doc: string | undefined) => {
    const key = at.join('.').replace(/\.\[\]/g, '[]');
    if (doc && at.length > 0 && out[key] === undefined) out[key] = doc;
  };
  const resolve = (name: string, file: string): Declaration | undefined => {
    const candidates = known.get(name) ?? [];
    return candidates.find((candidate) => candidate.file === file) ?? (candidates.length === 1 ? candidates[0] : undefined);
  };
  const seen = new Set<string>();
  const walk = (node: ts.Expression, at: string[], file: string, depth: number): void => {
    if (depth > 40) return;
    if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isSatisfiesExpression(node)) return walk(node.expression, at, file, depth + 1);
    if (ts.isIdentifier(node)) {
      const declaration = resolve(node.text, file);
      const key = `${node.text}@${at.join('.')}`;
      if (!declaration || seen.has(key)) return;
      seen.add(key);
      note(at, declaration.doc);
      return walk(declaration.expression, at, declaration.file, depth + 1);
    }
    if (ts.isObjectLiteralExpression(node)) {
      for (const property of node.properties) {
        if (!ts.isPropertyAssignment(property)) continue;
        const name = ts.isIdentifier(property.name) || ts.isStringLiteral(property.name) ? property.name.text : undefined;
        if (name === undefined) continue;
        note([...at, name], jsDocOf(property));
        walk(property.initializer, [...at, name], file, depth + 1);
      }
      return;
    }
    if (ts.isArrayLiteralExpression(node)) {
      for (const element of node.elements) if (!ts.isSpreadElement(element)) walk(element, at, file, depth + 1);
      return;
    }
    if (!ts.isCallExpression(node)) return;
    const callee = node.expression;
    const args = node.arguments;
    if (ts.isPropertyAccessExpression(callee)) {
      const method = callee.name.text;
      const onZ = ts.isIdentifier(callee.expression) && callee.expression.text === 'z';
      if (onZ) {
        const [first, second] = args;
        if ((method === 'object' || method === 'strictObject' || method === 'looseObject') && first) walk(first, at, file, depth + 1);
        else if (method === 'record' && second) walk(second, [...at, '<name>'], file, depth + 1);
        else if (method === 'array' && first) walk(first, [...at, '[]'], file, depth + 1);
        else if (method === 'union' || method === 'discriminatedUnion') for (const arg of args) walk(arg, at, file, depth + 1);
        else if ((method === 'preprocess' || method === 'pipe') && second) walk(second, at, file, depth + 1);
        return;
      }
      // A wrapper (.default, .prefault, .optional, .strict, .refine ...) or .extend({...}): the schema it is called on.
      if (method === 'extend' && args[0]) walk(args[0], at, file, depth + 1);
      return walk(callee.expression, at, file, depth + 1);
    }
    if (ts.isIdentifier(callee)) {
      const declaration = resolve(callee.text, file);
      if (declaration) walk(declaration.expression, at, declaration.file, depth + 1);
    }
  };
  const root = resolve('configSchema', path.join(SOURCE, 'config/config.ts'));
  if (!root) throw new Error('configSchema not found in src/config/config.ts');
  walk(root.expression, [], root.file, 0);
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

/** The generated module's text. */
export function descriptionsModule(): string {
  const entries = Object.entries(settingDescriptions()).map(([key, text]) => `  ${JSON.stringify(key)}:\n    ${JSON.stringify(text)},`);
  return [
    '// Generated by `npm run docs:config` (test/helpers/settings-jsdoc.ts) from the JSDoc of the settings\' zod schemas;',
    '// edit the comments in src/<module>/settings.ts, not this file.',
    '',
    '/** What each setting is for, by path (records as `<name>`, array items as `[]`): the JSON Schema\'s descriptions. */',
    'export const SETTING_DESCRIPTIONS: Record<string, string> = {',
    ...entries,
    '};',
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) writeFileSync(path.join(REPO_ROOT, DESCRIPTIONS_FILE), descriptionsModule());
