import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
// @ts-expect-error plain JavaScript beside bin/toolrouter.js, without declarations
import { satisfies, unsupportedNode } from '../../bin/supported-node.js';
import { REPO_ROOT } from '../helpers/paths.js';

const check = satisfies as (version: string, range: string) => boolean;
const refusal = unsupportedNode as (version: string, range: string) => string | undefined;

describe('bin/supported-node.js: the Node check before the CLI loads', () => {
  const { engines } = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };

  it('judges the package’s own engines range', () => {
    for (const version of ['22.15.0', '22.23.3', '24.0.0', '24.21.0', '26.1.0']) assert.equal(check(version, engines.node), true, version);
    for (const version of ['18.20.0', '20.20.2', '22.14.9', '23.11.0']) assert.equal(check(version, engines.node), false, version);
  });

  it('refuses in one line naming the Node and the range; takes a range it cannot read as satisfied', () => {
    const line = refusal('20.20.2', engines.node);
    assert.ok(line);
    assert.equal(line.split('\n').length, 1);
    assert.match(line, /^toolrouter: Node 20\.20\.2 is not supported; it needs Node \^22\.15\.0 or >=24/);
    assert.equal(refusal('24.21.0', engines.node), undefined);
    assert.equal(check('20.0.0', '>=18 <21'), true);
    assert.equal(check('21.1.0', '21'), true);
  });
});
