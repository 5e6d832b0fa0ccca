#!/usr/bin/env node
// The compiled CLI (`npm run build`); an installed package ships dist/, a clone builds it with `npm run build`.
import { existsSync, readFileSync } from 'node:fs';
import { URL } from 'node:url';
import { unsupportedNode } from './supported-node.js';

// Before anything else loads: on an unsupported Node the CLI would fail later, obscurely.
const { engines } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const refusal = engines?.node ? unsupportedNode(process.versions.node, engines.node) : undefined;
if (refusal) {
  console.error(refusal);
  process.exit(1);
}

const cli = new URL('../dist/src/cli.js', import.meta.url);
if (!existsSync(cli)) {
  console.error('toolrouter: dist/ is missing: run `npm run build` in the toolrouter directory first');
  process.exit(2);
}
await import(cli.href);
