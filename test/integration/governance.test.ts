import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, McpError, type ElicitRequest } from '@modelcontextprotocol/sdk/types.js';
import pino from 'pino';
import type { AuditEvent, AuditSink } from '../../src/audit/types.js';
import { loadConfig } from '../../src/config/config.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';
import { startFeaturesHttp, type FeaturesHttp } from '../fixtures/mcp/features-server.js';
import { startFilesServer, type FilesServer } from '../fixtures/mcp/files-server.js';
import { startIdentityProvider, type IdentityProvider } from '../fixtures/identity-provider.js';
import { freePort } from '../helpers/redis-server.js';
import { ADMIN_KEY, call, generateKey } from '../helpers/keys.js';
import { textOf } from '../helpers/mcp.js';
import { closeListening, untilIndexed } from '../helpers/router.js';
import { DONE_WHEN_POLICIES } from '../fixtures/done-when-policies.js';

/** The audit trail as the call path hands it over (the real store arrives with src/audit). */
class RecordingSink implements AuditSink {
  readonly events: AuditEvent[] = [];
  open = true;
  record(event: AuditEvent): void {
    this.events.push(event);
  }
  accepting(): boolean {
    return this.open;
  }
}

const GITHUB_TOKEN = `ghp_${'Qw3'.repeat(12)}`;

interface Person {
  client: Client;
  asked: ElicitRequest['params'][];
  answer: 'accept' | 'decline' | 'cancel';
}

async function person(url: string, key: string, elicits: boolean): Promise<Person> {
  const client = new Client({ name: 'governance-test', version: '1.0.0' }, { capabilities: elicits ? { elicitation: { form: {} } } : {} });
  const who: Person = { client, asked: [], answer: 'decline' };
  if (elicits) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      who.asked.push(request.params);
      return who.answer === 'accept' ? { action: 'accept', content: {} } : { action: who.answer };
    });
  }
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return who;
}

describe('governance: the done-when policy file over every face', () => {
  let files: FilesServer;
  let router: Toolrouter;
  let server: Server;
  let url: string;
  const audit = new RecordingSink();
  let contractor: { key: string; key_id: string };
  let staff: { key: string; key_id: string };
  let staffClient: Person;
  let contractorClient: Person;

  before(async () => {
    files = await startFilesServer();
    const dir = mkdtempSync(path.join(tmpdir(), 'tr-governance-'));
    const policyFile = path.join(dir, 'policies.cedar');
    writeFileSync(policyFile, DONE_WHEN_POLICIES);
    const config = loadConfig({}, {
      port: 0,
      host: '127.0.0.1',
      logLevel: 'silent',
      adminKey: ADMIN_KEY,
      policy: { files: [policyFile] },
      mcp: { search: true, codeMode: true, servers: { files: { url: files.url } } },
    });
    router = await createToolrouter(config, { log: pino({ level: 'silent' }), audit, policySighup: false });
    server = await listen(router);
    const address = server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    await router.mcp.upstreams.settled();
    await untilIndexed(router);
    contractor = await generateKey(url, { metadata: { groups: ['contractors'] } });
    staff = await generateKey(url, { metadata: { groups: ['staff'] } });
    staffClient = await person(url, staff.key, true);
    contractorClient = await person(url, contractor.key, true);
  });

  after(async () => {
    for (const who of [staffClient, contractorClient]) await who?.client.close().catch(() => {});
    await closeListening(router, server);
    await files?.close();
  });

  const received = (tool: string) => files.calls.filter((received) => received.tool === tool);

  it("the contractor's delete is a REST 403 naming the policy, and never reaches the upstream", async () => {
    const reply = await call(url, 'POST', '/mcp-rest/tools/call', { key: contractor.key, body: { name: 'files__delete_file', arguments: { path: '/data/a' } } });
    assert.equal(reply.status, 403, JSON.stringify(reply.body));
    assert.equal(reply.body.error.code, 'policy_denied');
    assert.deepEqual(reply.body.error.policies, ['contractors-never-delete']);
    assert.match(reply.body.error.message, /contractors-never-delete/);
    assert.deepEqual(received('delete_file'), []);
    const event = audit.events.at(-1)!;
    assert.equal(event.decision, 'deny');
    assert.equal(event.outcome, 'not_run');
    assert.equal(event.surface, 'rest');
    assert.deepEqual(event.caller, { kind: 'key', id: contractor.key_id, groups: ['contractors'] });
    assert.deepEqual(event.policies, ['contractors-never-delete']);
  });

  it('on MCP the direct call is a JSON-RPC error naming the policy; through call_tool an isError result', async () => {
    await assert.rejects(
      contractorClient.client.callTool({ name: 'files__delete_file', arguments: { path: '/data/a' } }),
      (error: { code?: number; message?: string; data?: { code?: string; policies?: string[] } }) =>
        error.code === -32003 && error.data?.code === 'policy_denied' && error.data.policies?.[0] === 'contractors-never-delete',
    );
    const through = await contractorClient.client.callTool({ name: 'call_tool', arguments: { name: 'files__delete_file', arguments: { path: '/data/a' } } });
    assert.equal(through.isError, true);
    assert.match(textOf(through), /contractors-never-delete/);
    assert.deepEqual(contractorClient.asked, [], 'a denied call asks nobody');
    assert.deepEqual(received('delete_file'), []);
  });

  it("the contractor's searches never find the delete tool; staff's do", async () => {
    for (const query of ['select:files__delete_file', 'delete a file from the disk']) {
      const mine = await call(url, 'POST', '/v1/tools/search', { key: contractor.key, body: { query } });
      assert.equal(mine.status, 200);
      assert.ok(!mine.body.results.some((tool: { name: string }) => tool.name === 'files__delete_file'), `${query}: ${JSON.stringify(mine.body.results.map((t: { name: string }) => t.name))}`);
      const theirs = await call(url, 'POST', '/v1/tools/search', { key: staff.key, body: { query } });
      assert.ok(theirs.body.results.some((tool: { name: string }) => tool.name === 'files__delete_file'), query);
    }
    const found = async (who: Person) => JSON.parse(textOf(await who.client.callTool({ name: 'search_tools', arguments: { query: 'delete a file', detail: 'full' } })).split('\n')[0]!) as { tools: { name: string }[] };
    assert.ok(!(await found(contractorClient)).tools.some((tool) => tool.name === 'files__delete_file'));
    assert.ok((await found(staffClient)).tools.some((tool) => tool.name === 'files__delete_file'));
    // The catalog listing (the console's) leaves it out too.
    const catalogNames = (key: string) => call(url, 'GET', '/v1/catalog', { key }).then((reply) => reply.body.tools.map((entry: { tool: { name: string } }) => entry.tool.name) as string[]);
    assert.ok(!(await catalogNames(contractor.key)).includes('files__delete_file'));
    assert.ok((await catalogNames(staff.key)).includes('files__delete_file'));
    // Permitted for some arguments only (write_file under /data): listed for both.
    const listed = (await call(url, 'GET', '/mcp-rest/tools/list', { key: contractor.key })).body;
    const names = (Array.isArray(listed) ? listed : listed.tools).map((tool: { name: string }) => tool.name);
    assert.ok(names.includes('files__write_file') && names.includes('files__read_file') && !names.includes('files__delete_file'), JSON.stringify(names));
  });

  it('write_file outside /data is denied (no policy permits it); under /data it runs', async () => {
    const outside = await call(url, 'POST', '/mcp-rest/tools/call', { key: staff.key, body: { name: 'files__write_file', arguments: { path: '/etc/passwd', content: 'x' } } });
    assert.equal(outside.status, 403);
    assert.equal(outside.body.error.code, 'policy_denied');
    assert.deepEqual(outside.body.error.policies, []);
    assert.deepEqual(received('write_file'), []);
    const inside = await call(url, 'POST', '/mcp-rest/tools/call', { key: staff.key, body: { name: 'files__write_file', arguments: { path: '/data/notes.txt', content: 'hello' } } });
    assert.equal(inside.status, 200, JSON.stringify(inside.body));
    assert.deepEqual(received('write_file'), [{ tool: 'write_file', arguments: { path: '/data/notes.txt', content: 'hello' } }]);
    assert.equal(audit.events.at(-1)!.decision, 'permit');
    assert.deepEqual(audit.events.at(-1)!.policies, ['write-under-data']);
    assert.equal(audit.events.at(-1)!.outcome, 'ok');
  });

  it('a declined confirmation never reaches the upstream; an accepted one runs the call', async () => {
    staffClient.answer = 'decline';
    const declined = await staffClient.client.callTool({ name: 'files__delete_file', arguments: { path: '/data/old.txt' } });
    assert.equal(declined.isError, true);
    assert.match(textOf(declined), /declined/);
    assert.equal(staffClient.asked.length, 1);
    assert.match(staffClient.asked[0]!.message, /Delete this file for good\?/);
    assert.match(staffClient.asked[0]!.message, /files__delete_file/);
    assert.match(staffClient.asked[0]!.message, /\/data\/old\.txt/);
    assert.deepEqual(received('delete_file'), []);
    assert.equal(audit.events.at(-1)!.decision, 'declined');

    staffClient.answer = 'cancel';
    const cancelled = await staffClient.client.callTool({ name: 'call_tool', arguments: { name: 'files__delete_file', arguments: { path: '/data/old.txt' } } });
    assert.equal(cancelled.isError, true);
    assert.deepEqual(received('delete_file'), []);

    staffClient.answer = 'accept';
    const accepted = await staffClient.client.callTool({ name: 'files__delete_file', arguments: { path: '/data/old.txt' } });
    assert.equal(accepted.isError, undefined);
    assert.equal(textOf(accepted), 'deleted /data/old.txt');
    assert.deepEqual(received('delete_file'), [{ tool: 'delete_file', arguments: { path: '/data/old.txt' } }]);
    assert.equal(audit.events.at(-1)!.decision, 'confirmed');
    assert.deepEqual(audit.events.at(-1)!.policies, ['deletes-confirmed']);
  });

  it('on 2026-07-28 the confirmation is an input-required round: decline never runs, accept runs', async () => {
    const MODERN = '2026-07-28';
    const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } } };
    const post = async (params: Record<string, unknown>) => {
      const response = await fetch(`${url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${staff.key}`, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'files__delete_file' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'files__delete_file', arguments: { path: '/data/modern.txt' }, _meta: meta, ...params } }),
      });
      const text = await response.text();
      const data = text.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5)).pop();
      return JSON.parse(data ?? text);
    };
    const ran = () => received('delete_file').filter((got) => got.arguments.path === '/data/modern.txt').length;
    for (const action of ['decline', 'accept'] as const) {
      const first = await post({});
      assert.equal(first.result?.resultType, 'input_required', JSON.stringify(first));
      const [id, request] = Object.entries(first.result.inputRequests)[0] as [string, { method: string; params: { message: string } }];
      assert.equal(request.method, 'elicitation/create');
      assert.match(request.params.message, /Delete this file for good\?/);
      assert.equal(ran(), 0, 'nothing runs while the question is open');
      const answered = await post({ requestState: first.result.requestState, inputResponses: { [id]: action === 'accept' ? { action, content: {} } : { action } } });
      if (action === 'decline') {
        assert.equal(answered.result?.isError, true, JSON.stringify(answered));
        assert.equal(ran(), 0);
      } else {
        assert.equal(answered.result?.content?.[0]?.text, 'deleted /data/modern.txt', JSON.stringify(answered));
        assert.equal(ran(), 1);
      }
    }
  });

  it('REST (no way to ask) gets confirmation_required naming the policy', async () => {
    const before = received('delete_file').length;
    const reply = await call(url, 'POST', '/mcp-rest/tools/call', { key: staff.key, body: { name: 'files__delete_file', arguments: { path: '/data/b' } } });
    assert.equal(reply.status, 403);
    assert.equal(reply.body.error.code, 'confirmation_required');
    assert.deepEqual(reply.body.error.policies, ['deletes-confirmed']);
    assert.equal(received('delete_file').length, before);
  });

  it('a GitHub token in arguments never reaches the upstream, and is never echoed', async () => {
    const reply = await call(url, 'POST', '/mcp-rest/tools/call', { key: staff.key, body: { name: 'files__write_file', arguments: { path: '/data/token.txt', content: `export GH=${GITHUB_TOKEN}` } } });
    assert.equal(reply.status, 403);
    assert.equal(reply.body.error.code, 'guardrail_blocked');
    assert.match(reply.body.error.message, /secretlint-rule-github/);
    assert.ok(!JSON.stringify(reply.body).includes(GITHUB_TOKEN));
    assert.ok(!received('write_file').some((got) => JSON.stringify(got).includes('ghp_')));
    const event = audit.events.at(-1)!;
    assert.equal(event.decision, 'blocked');
    assert.ok(!JSON.stringify(event).includes(GITHUB_TOKEN));
    assert.match(JSON.stringify(event.arguments), /\[REDACTED:@secretlint\/secretlint-rule-github\]/);
  });

  it('a credential in a result is redacted before the caller sees it', async () => {
    const reply = await call(url, 'POST', '/mcp-rest/tools/call', { key: staff.key, body: { name: 'files__read_file', arguments: { path: '/data/secrets.txt' } } });
    assert.equal(reply.status, 200);
    assert.match(JSON.stringify(reply.body), /token=\[REDACTED:@secretlint\/secretlint-rule-github\]/);
    assert.ok(!JSON.stringify(reply.body).includes('ghp_'));
  });

  it("code mode's calls are governed too (surface code, error.code policy_denied)", async () => {
    const before = received('delete_file').length;
    const result = await contractorClient.client.callTool({
      name: 'execute',
      arguments: { code: `try { await call_tool("files__delete_file", { path: "/data/c" }); return "ran"; } catch (error) { return error.code; }` },
    });
    assert.match(textOf(result), /policy_denied/, textOf(result));
    assert.equal(received('delete_file').length, before);
    assert.equal(audit.events.at(-1)!.surface, 'code');
  });

  it('POST /v1/policy/check answers the decision, the policies and the confirmation (admin only)', async () => {
    const denied = await call(url, 'POST', '/v1/policy/check', { key: ADMIN_KEY, body: { caller: { key_id: contractor.key_id }, tool: 'files__delete_file', arguments: { path: '/data/a' } } });
    assert.equal(denied.status, 200, JSON.stringify(denied.body));
    assert.deepEqual(denied.body, { decision: 'deny', policies: ['contractors-never-delete'], mode: 'enforce' });
    const confirm = await call(url, 'POST', '/v1/policy/check', { key: ADMIN_KEY, body: { caller: { subject: 'alice', groups: ['staff'] }, tool: 'files__delete_file', arguments: {} } });
    assert.deepEqual(confirm.body, { decision: 'permit', policies: ['deletes-confirmed'], confirm: { question: 'Delete this file for good?', policy: 'deletes-confirmed' }, mode: 'enforce' });
    const asGroup = await call(url, 'POST', '/v1/policy/check', { key: ADMIN_KEY, body: { caller: { subject: 'bob', groups: ['contractors'] }, tool: 'files__delete_file' } });
    assert.equal(asGroup.body.decision, 'deny');
    const refused = await call(url, 'POST', '/v1/policy/check', { key: staff.key, body: { caller: { subject: 'x' }, tool: 'files__delete_file' } });
    assert.equal(refused.status, 403);
  });

  it('counts decisions, confirmations and guardrail hits in /metrics', async () => {
    const text = (await call(url, 'GET', '/metrics', { key: ADMIN_KEY })).body as string;
    for (const decision of ['permit', 'deny', 'confirmed', 'declined', 'blocked']) {
      assert.match(text, new RegExp(`^toolrouter_policy_decisions_total\\{decision="${decision}"\\} [1-9]`, 'm'), decision);
    }
    assert.match(text, /^toolrouter_confirmations_total\{outcome="declined"\} [1-9]/m);
    assert.match(text, /^toolrouter_confirmations_total\{outcome="accepted"\} [1-9]/m);
    assert.match(text, /^toolrouter_guardrail_hits_total\{rule="@secretlint\/secretlint-rule-github",action="block"\} 1$/m);
    assert.match(text, /^toolrouter_guardrail_hits_total\{rule="@secretlint\/secretlint-rule-github",action="redact"\} [1-9]/m);
  });

  it('fails closed with audit_unavailable while the audit trail cannot take records', async () => {
    audit.open = false;
    try {
      const before = files.calls.length;
      const reply = await call(url, 'POST', '/mcp-rest/tools/call', { key: staff.key, body: { name: 'files__read_file', arguments: { path: '/data/x' } } });
      assert.equal(reply.status, 503);
      assert.equal(reply.body.error.code, 'audit_unavailable');
      assert.equal(files.calls.length, before);
    } finally {
      audit.open = true;
    }
  });
});

describe('governance for signed-in users: groups and claims from the JWT', () => {
  let idp: IdentityProvider;
  let files: FilesServer;
  let router: Toolrouter;
  let server: Server;
  let base: string;
  let resource: string;

  before(async () => {
    idp = await startIdentityProvider();
    files = await startFilesServer();
    const dir = mkdtempSync(path.join(tmpdir(), 'tr-governance-jwt-'));
    const policyFile = path.join(dir, 'policies.cedar');
    writeFileSync(policyFile, `${DONE_WHEN_POLICIES}
@id("engineering-writes-anywhere")
permit (principal in Group::"staff", action == Action::"call_tool", resource)
when { resource.name == "write_file" && principal.claims has department && principal.claims.department.contains("engineering") };`);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    resource = `${base}/mcp`;
    const config = loadConfig({}, {
      port,
      host: '127.0.0.1',
      logLevel: 'silent',
      adminKey: ADMIN_KEY,
      auth: { oauth: { issuer: idp.issuer, audience: resource, jwksCooldownMs: 0 } },
      policy: { files: [policyFile], claims: ['department'] },
      mcp: { search: true, servers: { files: { url: files.url } } },
    });
    router = await createToolrouter(config, { audit: new RecordingSink(), policySighup: false, log: pino({ level: 'silent' }) });
    server = await listen(router);
    await router.mcp.upstreams.settled();
    await untilIndexed(router);
  });

  after(async () => {
    await closeListening(router, server);
    await files?.close();
    await idp?.close();
  });

  it('a token whose groups claim says contractors is denied the delete and does not find it; staff does', async () => {
    const contractor = await idp.mint({ sub: 'carl', aud: resource, groups: ['contractors'] });
    const staff = await idp.mint({ sub: 'sara', aud: resource, groups: ['staff'] });
    const denied = await call(base, 'POST', '/mcp-rest/tools/call', { key: contractor, body: { name: 'files__delete_file', arguments: { path: '/data/a' } } });
    assert.equal(denied.status, 403, JSON.stringify(denied.body));
    assert.deepEqual(denied.body.error.policies, ['contractors-never-delete']);
    const found = async (token: string) => (await call(base, 'POST', '/v1/tools/search', { key: token, body: { query: 'select:files__delete_file' } })).body.results.length;
    assert.equal(await found(contractor), 0);
    assert.equal(await found(staff), 1);
    assert.equal(files.calls.length, 0);
  });

  it('a listed claim is an attribute: engineering staff may write outside /data, other staff may not', async () => {
    const engineer = await idp.mint({ sub: 'erin', aud: resource, groups: ['staff'], department: 'engineering' });
    const sales = await idp.mint({ sub: 'sam', aud: resource, groups: ['staff'], department: ['sales'] });
    const write = (token: string) => call(base, 'POST', '/mcp-rest/tools/call', { key: token, body: { name: 'files__write_file', arguments: { path: '/srv/x', content: 'y' } } });
    assert.equal((await write(engineer)).status, 200);
    assert.equal((await write(sales)).status, 403);
    assert.deepEqual(files.calls.map((got) => got.arguments.path), ['/srv/x']);
  });
});

/** Resources and prompts go through the same seam as tools: Action::"read_resource" and Action::"get_prompt". */
describe('governance: resource reads and prompt gets are decided and audited like calls', () => {
  let features: FeaturesHttp;
  let router: Toolrouter;
  let server: Server;
  let client: Client;
  const audit = new RecordingSink();

  before(async () => {
    features = await startFeaturesHttp();
    const dir = mkdtempSync(path.join(tmpdir(), 'tr-governance-resources-'));
    const policyFile = path.join(dir, 'policies.cedar');
    // The readme may be read; no item of the template, and no prompt (nothing permits get_prompt).
    writeFileSync(
      policyFile,
      `@id("readme-only")
permit (principal, action == Action::"read_resource", resource) when { resource.name == "notes://readme" };
@id("calls")
permit (principal, action == Action::"call_tool", resource);`,
    );
    const config = loadConfig({}, {
      port: 0,
      host: '127.0.0.1',
      logLevel: 'silent',
      adminKey: ADMIN_KEY,
      policy: { files: [policyFile] },
      mcp: { servers: { feat: { url: features.url } } },
    });
    router = await createToolrouter(config, { log: pino({ level: 'silent' }), audit, policySighup: false });
    server = await listen(router);
    const address = server.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    await router.mcp.upstreams.settled();
    await untilIndexed(router);
    client = new Client({ name: 'governance-resources', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}` } } }));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await closeListening(router, server);
    await features?.close();
  });

  it('a permitted read runs; an unpermitted read and a prompt get are refused (policy_denied, not run), and each attempt is audited', async () => {
    const read = await client.readResource({ uri: 'notes://readme' });
    assert.equal((read.contents[0] as { text: string }).text, 'fixture readme');
    const refused = (what: string) => (error: unknown) => {
      assert.ok(error instanceof McpError);
      assert.match(error.message, new RegExp(`${what} denied: no policy permits it`));
      assert.deepEqual(error.data, { code: 'policy_denied', policies: [] });
      return true;
    };
    await assert.rejects(client.readResource({ uri: 'notes://items/42' }), refused('read_resource "notes://items/42"'));
    await assert.rejects(client.getPrompt({ name: 'feat__summarize', arguments: { topic: 'tides' } }), refused('get_prompt "feat__summarize"'));
    const seen = audit.events.map((event) => [event.action, event.tool, event.decision, event.outcome]);
    assert.deepEqual(seen, [
      ['read_resource', 'notes://readme', 'permit', 'ok'],
      ['read_resource', 'notes://items/42', 'deny', 'not_run'],
      ['get_prompt', 'feat__summarize', 'deny', 'not_run'],
    ]);
    assert.deepEqual(audit.events[0]!.policies, ['readme-only']);
  });
});
