#!/usr/bin/env node
// The compiled CLI (`npm run build`); an installed package ships dist/, a clone builds it with `npm run build`.
import { existsSync } from 'node:fs';
import { URL } from 'node:url';

const cli = new URL('../dist/src/cli.js', import.meta.url);
if (!existsSync(cli)) {
  console.error('toolrouter: dist/ is missing: run `npm run build` in the toolrouter directory first');
  process.exit(2);
}
await import(cli.href);
