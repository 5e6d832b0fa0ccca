/**
 * Where toolrouter's own files are, found from this module's location rather than the working directory or the
 * repository layout: `src/` under tsx, `dist/src/` once compiled, and either of them inside `node_modules` (or a
 * global prefix) when installed.
 */
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface PackageJson {
  name?: string;
  version: string;
}

let found: { root: string; pkg: PackageJson } | undefined;

function findPackage(): { root: string; pkg: PackageJson } {
  if (found) return found;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as PackageJson;
      if (pkg.name === 'toolrouter') return (found = { root: dir, pkg });
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`toolrouter's package.json not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

/** The directory holding toolrouter's package.json (a clone, or the installed package). */
export function packageRoot(): string {
  return findPackage().root;
}

/** toolrouter's version, from its package.json. */
export function packageVersion(): string {
  return findPackage().pkg.version;
}

/** The web console's static files: src/console beside the sources; `npm run build` copies it to dist/src/console. */
export function consoleDir(): string {
  return fileURLToPath(new URL('./console/', import.meta.url));
}

/** The package's own `models/`, where the offline default model is shipped (packed, or built in a clone). */
export function shippedModelsDir(): string {
  return path.join(packageRoot(), 'models');
}

/**
 * Default `embedding.modelsDir` (MODELS_DIR): `models/` in the package when it is there (a clone, an image, a global
 * install after `sudo toolrouter models build`) or can be made there (a user-owned install), else the user's cache (`$XDG_CACHE_HOME/toolrouter/models`, default
 * `~/.cache/toolrouter/models`), so a global install under a root-owned prefix still finds a writable place to
 * build the offline model.
 */
export function defaultModelsDir(env: NodeJS.ProcessEnv = process.env): string {
  const root = packageRoot();
  const inPackage = path.join(root, 'models');
  if (existsSync(inPackage) || writable(root)) return inPackage;
  const cache = env.XDG_CACHE_HOME || path.join(homedir(), '.cache');
  return path.join(cache, 'toolrouter', 'models');
}

function writable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
