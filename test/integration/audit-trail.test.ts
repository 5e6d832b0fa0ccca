/**
 * Issue 53's "done when", audit part: with the policy file and the real audit trail (JSON Lines under stateDir), each
 * attempt shows in GET /v1/audit with its decision, a GitHub token in arguments is redacted in the record and never
 * reaches the upstream, `toolrouter audit verify` passes, and fails naming the record once one line is edited.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import pino from 'pino';
import type { AuditRecord } from '../../src/audit/types.js';
import { loadConfig } from '../../src/config/config.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startFilesServer, type FilesServer } from '../fixtures/mcp/files-server.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { CLI, runToEnd } from '../helpers/ops-processes.js';
import { closeListening, untilIndexed } from '../helpers/router.js';
import { DONE_WHEN_POLICIES } from '../fixtures/done-when-policies.js';

const GITHUB_TOKEN = `ghp_${'Rt7'.repeat(12)}`;

function verifyCli(stateDir: string): ReturnType<typeof runToEnd> {
  const config = path.join(stateDir, 'cli.yaml');
  writeFileSync(config, `stateDir: ${stateDir}\n`);
  return runToEnd([...CLI, 'audit', 'verify'], { TOOLROUTER_CONFIG: config });
}

describe('the audit trail over governed calls', { timeout: 120_000 }, () => {
  let files: FilesServer;
  let router: Toolrouter;
  let server: Server;
  let url: string;
  let stateDir: string;
  let contractor: { key: string; key_id: string };
  let staff: { key: string; key_id: string };
  let client: Client;
  let answer: 'accept' | 'decline' = 'decline';

  before(async () => {
    files = await startFilesServer();
    stateDir = mkdtempSync(path.join(tmpdir(), 'tr-audit-trail-'));
    const policyFile = path.join(stateDir, 'policies.cedar');
    writeFileSync(policyFile, DONE_WHEN_POLICIES);
    const config = loadConfig({}, {
      port: 0,
      host: '127.0.0.1',
      logLevel: 'silent',
      adminKey: ADMIN_KEY,
      stateDir,
      policy: { files: [policyFile] },
      audit: { arguments: 'full' },
      mcp: { search: true, servers: { files: { url: files.url } } },
    });
    router = await createToolrouter(config, { log: pino({ level: 'silent' }), policySighup: false });
    server = await listen(router);
    const address = server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    await router.mcp.upstreams.settled();
    await untilIndexed(router);
    contractor = await generateKey(url, { metadata: { groups: ['contractors'] } });
    staff = await generateKey(url, { metadata: { groups: ['staff'] } });
    client = new Client({ name: 'audit-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async () => (answer === 'accept' ? { action: 'accept', content: {} } : { action: 'decline' }));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${staff.key}` } } }));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await closeListening(router, server);
    await files?.close();
  });

  it('records every attempt with its decision, deciding policies and outcome, newest first', async () => {
    const rest = (key: string, name: string, args: Record<string, unknown>) => call(url, 'POST', '/mcp-rest/tools/call', { key, body: { name, arguments: args } });
    assert.equal((await rest(contractor.key, 'files__delete_file', { path: '/data/a' })).status, 403);
    assert.equal((await rest(staff.key, 'files__write_file', { path: '/data/b', content: 'x' })).status, 200);
    assert.equal((await rest(staff.key, 'files__write_file', { path: '/etc/passwd', content: 'x' })).status, 403);
    const blocked = await rest(staff.key, 'files__write_file', { path: '/data/c', content: `token ${GITHUB_TOKEN}` });
    assert.equal(blocked.body.error?.code, 'guardrail_blocked');
    answer = 'decline';
    await client.callTool({ name: 'call_tool', arguments: { name: 'files__delete_file', arguments: { path: '/data/d' } } });
    answer = 'accept';
    await client.callTool({ name: 'call_tool', arguments: { name: 'files__delete_file', arguments: { path: '/data/e' } } });
    assert.deepEqual(files.calls.map((received) => `${received.tool} ${String(received.arguments.path)}`), ['write_file /data/b', 'delete_file /data/e']);
    assert.ok(!JSON.stringify(files.calls).includes(GITHUB_TOKEN));

    assert.equal(await router.audit!.flush(), true);
    const page = await call(url, 'GET', '/v1/audit?limit=10', { key: ADMIN_KEY });
    assert.equal(page.status, 200, JSON.stringify(page.body));
    const records = page.body.records as AuditRecord[];
    assert.deepEqual(
      records.map((record) => [record.surface, record.caller.id, record.tool, record.decision, record.outcome]),
      [
        ['mcp', staff.key_id, 'files__delete_file', 'confirmed', 'ok'],
        ['mcp', staff.key_id, 'files__delete_file', 'declined', 'not_run'],
        ['rest', staff.key_id, 'files__write_file', 'blocked', 'not_run'],
        ['rest', staff.key_id, 'files__write_file', 'deny', 'not_run'],
        ['rest', staff.key_id, 'files__write_file', 'permit', 'ok'],
        ['rest', contractor.key_id, 'files__delete_file', 'deny', 'not_run'],
      ],
    );
    assert.deepEqual(records.at(-1)!.policies, ['contractors-never-delete']);
    assert.deepEqual(records.at(-1)!.caller.groups, ['contractors']);
    assert.deepEqual(records[0]!.policies, ['deletes-confirmed']);
    assert.ok(records.every((record) => record.instance && /^[0-9a-f]{64}$/.test(record.hash) && typeof record.ms === 'number'));
    // The credential is named by its rule in the record, never kept.
    assert.ok(!JSON.stringify(records).includes(GITHUB_TOKEN));
    assert.match(JSON.stringify(records[2]!.arguments), /\[REDACTED:[^\]]+\]/);

    const denials = await call(url, 'GET', `/v1/audit?decision=deny&caller=${encodeURIComponent(contractor.key_id)}`, { key: ADMIN_KEY });
    assert.deepEqual((denials.body.records as AuditRecord[]).map((record) => record.tool), ['files__delete_file']);
    const paged = await call(url, 'GET', `/v1/audit?limit=4`, { key: ADMIN_KEY });
    const rest2 = await call(url, 'GET', `/v1/audit?limit=4&cursor=${paged.body.next}`, { key: ADMIN_KEY });
    assert.deepEqual([...paged.body.records, ...rest2.body.records].map((record: AuditRecord) => record.id), records.map((record) => record.id));
  });

  it('GET /v1/audit is the admin\'s, and refuses bad parameters with a 400 naming them', async () => {
    assert.equal((await call(url, 'GET', '/v1/audit', { key: staff.key })).status, 403);
    const bad = await call(url, 'GET', '/v1/audit?since=9999999999999999', { key: ADMIN_KEY });
    assert.equal(bad.status, 400);
    assert.match(JSON.stringify(bad.body), /since/);
    assert.equal((await call(url, 'GET', '/v1/audit?decision=maybe', { key: ADMIN_KEY })).status, 400);
    assert.equal((await call(url, 'GET', '/v1/audit?cursor=abc', { key: ADMIN_KEY })).status, 400);
  });

  it('toolrouter audit verify passes on the trail, and fails naming the record once one line is edited', async () => {
    await router.audit!.flush();
    const intact = await verifyCli(stateDir);
    assert.equal(intact.code, 0, intact.stderr);
    assert.match(intact.stdout, /intact: 6 record/);
    const dir = path.join(stateDir, 'audit');
    const [file] = readdirSync(dir);
    const lines = readFileSync(path.join(dir, file!), 'utf8').trimEnd().split('\n');
    const target = JSON.parse(lines[0]!) as AuditRecord;
    lines[0] = JSON.stringify({ ...target, decision: 'permit' });
    writeFileSync(path.join(dir, file!), lines.join('\n') + '\n');
    const broken = await verifyCli(stateDir);
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, new RegExp(`broken at record ${target.id}.*edited`));
  });
});
