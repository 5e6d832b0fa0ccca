/**
 * Issue 53: a policy reload under load drops no request. Four callers call a permitted and a forbidden tool in a loop
 * while the policy file is rewritten and reloaded again and again (a bad edit among the rewrites): every permitted
 * call runs, every forbidden one is a 403, never a 500 or a call that slipped through while the set was swapped.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startFilesServer, type FilesServer } from '../fixtures/mcp/files-server.js';
import { ADMIN_KEY, call } from '../helpers/keys.js';
import { closeListening, untilIndexed } from '../helpers/router.js';

const version = (n: number) => `
@id("reads-v${n}")
permit (principal, action == Action::"call_tool", resource) when { resource.readOnlyHint };
@id("no-deletes-v${n}")
forbid (principal, action == Action::"call_tool", resource) when { resource.destructiveHint };
`;

describe('policy reload under load', { timeout: 120_000 }, () => {
  let files: FilesServer;
  let router: Toolrouter;
  let server: Server;
  let url: string;
  let policyFile: string;

  before(async () => {
    files = await startFilesServer();
    policyFile = path.join(mkdtempSync(path.join(tmpdir(), 'tr-policy-reload-')), 'policies.cedar');
    writeFileSync(policyFile, version(0));
    const config = loadConfig({}, { port: 0, host: '127.0.0.1', logLevel: 'silent', adminKey: ADMIN_KEY, policy: { files: [policyFile] }, mcp: { search: true, servers: { files: { url: files.url } } } });
    router = await createToolrouter(config, { log: pino({ level: 'silent' }), policySighup: false });
    server = await listen(router);
    const address = server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    await router.mcp.upstreams.settled();
    await untilIndexed(router);
  });

  after(async () => {
    await closeListening(router, server);
    await files?.close();
  });

  it('every permitted call runs and every forbidden one is refused while the set is reloaded 20 times', async () => {
    let reloading = true;
    const outcomes = { read: new Map<number, number>(), delete: new Map<number, number>() };
    const count = (map: Map<number, number>, status: number) => map.set(status, (map.get(status) ?? 0) + 1);
    const deniedBy = new Set<string>();
    const callers = Array.from({ length: 4 }, async (_, c) => {
      for (let i = 0; reloading; i++) {
        const read = await call(url, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, body: { name: 'files__read_file', arguments: { path: `/data/${c}-${i}` } } });
        count(outcomes.read, read.status);
        const deleted = await call(url, 'POST', '/mcp-rest/tools/call', { key: ADMIN_KEY, body: { name: 'files__delete_file', arguments: { path: `/data/${c}-${i}` } } });
        count(outcomes.delete, deleted.status);
        for (const id of (deleted.body?.error?.policies as string[] | undefined) ?? []) deniedBy.add(id);
      }
    });
    const results: boolean[] = [];
    for (let n = 1; n <= 20; n++) {
      // Every fifth rewrite is a bad edit: the last good set stays in use.
      writeFileSync(policyFile, n % 5 === 0 ? 'permit (principal, action == Action::"call_tool", resource) when { resource.nosuch };' : version(n));
      results.push(await router.policy.reload('test'));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    reloading = false;
    await Promise.all(callers);
    assert.deepEqual(results, Array.from({ length: 20 }, (_, i) => (i + 1) % 5 !== 0));
    assert.deepEqual([...outcomes.read.keys()], [200], `reads: ${JSON.stringify([...outcomes.read])}`);
    assert.deepEqual([...outcomes.delete.keys()], [403], `deletes: ${JSON.stringify([...outcomes.delete])}`);
    assert.ok((outcomes.read.get(200) ?? 0) >= 20);
    assert.equal(files.calls.filter((received) => received.tool === 'delete_file').length, 0, 'no delete reached the upstream');
    assert.ok(deniedBy.size > 1, `denials named the set in use at each moment: ${[...deniedBy].join(', ')}`);
  });
});
