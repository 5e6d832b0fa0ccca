/**
 * Node's flags as `npm start` gives them (package.json's start script, e.g. --max-semi-space-size=16), so the
 * benchmarked servers run as a user's does.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export function startFlags(): string[] {
  const script = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  const flags = /exec node ((?:--\S+ )*)dist\/src\/cli\.js serve/.exec(script)?.[1];
  if (flags === undefined) throw new Error(`cannot read node's flags from the start script: ${script}`);
  return flags.trim().split(' ').filter(Boolean);
}
