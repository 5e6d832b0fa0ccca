import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ListToolsResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { readableLine } from '../../src/mcp/upstream/errors.js';

test('a validation dump (the SDK\'s zod message) becomes one readable line naming the first issues', () => {
  // A real failure of the SDK's own schema on a hostile tools/list answer: hundreds of bad tools.
  const parsed = ListToolsResultSchema.safeParse({ tools: Array.from({ length: 200 }, (_, index) => ({ name: index, inputSchema: 'nope' })) });
  assert.equal(parsed.success, false);
  const dump = `re-listing tools failed: ${parsed.error!.message}`;
  assert.ok(dump.length > 5_000, `the dump is long (${dump.length})`);
  const line = readableLine(dump);
  assert.ok(line.length <= 501, `${line.length}`);
  assert.ok(!line.includes('\n'));
  assert.match(line, /^re-listing tools failed: invalid answer \(tools\.0\.name: /);
  assert.match(line, /and \d+ more\)/);
});

test('plain messages stay as they are, folded and bounded', () => {
  assert.equal(readableLine('HTTP 401 Unauthorized:\n  invalid token'), 'HTTP 401 Unauthorized: invalid token');
  assert.equal(readableLine('x'.repeat(2_000)).length, 501);
  assert.equal(readableLine('a list [1, 2] is not a dump'), 'a list [1, 2] is not a dump');
});
