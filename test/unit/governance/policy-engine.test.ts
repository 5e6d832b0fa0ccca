import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import pino from 'pino';
import { Access } from '../../../src/auth/access.js';
import type { KeyRecord } from '../../../src/auth/keys.js';
import { cedarArguments } from '../../../src/policy/arguments.js';
import { PolicyEngine } from '../../../src/policy/engine.js';
import { compilePolicies, PolicyLoadError } from '../../../src/policy/load.js';
import { cedarSchema } from '../../../src/policy/schema.js';
import { PolicyService } from '../../../src/policy/service.js';
import { policySettingsSchema } from '../../../src/policy/settings.js';
import type { PolicyTarget } from '../../../src/policy/types.js';

const POLICIES = `
@id("contractors-no-delete")
forbid (principal in Group::"contractors", action == Action::"call_tool", resource)
when { resource.destructiveHint };

@id("write-under-data")
permit (principal, action == Action::"call_tool", resource)
when { resource.name == "write_file" && context.arguments has path && context.arguments.path like "/data/*" };

@id("reads")
permit (principal, action == Action::"call_tool", resource) when { resource.readOnlyHint };

@confirm("Delete this for good?")
permit (principal, action == Action::"call_tool", resource) when { resource.name == "delete_file" };
`;

const settings = policySettingsSchema.parse({ files: ['policies.cedar'] });
const log = pino({ level: 'silent' });

function engineWith(text: string, overrides: Record<string, unknown> = {}): PolicyEngine {
  const merged = policySettingsSchema.parse({ files: ['policies.cedar'], ...overrides });
  const engine = new PolicyEngine(merged, log);
  engine.use(compilePolicies([{ file: 'policies.cedar', text }], cedarSchema(merged.claims)));
  return engine;
}

function keyAccess(keyId: string, groups: string[] = [], alias?: string): Access {
  const record: KeyRecord = { keyId, secretHash: 'x', createdAt: 0, toolSearchEnabled: true, metadata: { groups }, ...(alias ? { alias } : {}) } as KeyRecord;
  return Access.forKey(record);
}

const tool = (name: string, annotations: PolicyTarget['annotations'] = {}): PolicyTarget => ({ id: `fs__${name}`, name, server: 'fs', annotations });
const deleteFile = tool('delete_file', { destructiveHint: true });
const writeFile = tool('write_file', { destructiveHint: false });
const readFile = tool('read_file', { readOnlyHint: true });

test('a contractor key is forbidden to delete (forbid wins over the @confirm permit), naming the policy', () => {
  const engine = engineWith(POLICIES);
  const decision = engine.decide({ action: 'call_tool', access: keyAccess('k_contractor', ['contractors']), target: deleteFile, surface: 'rest' });
  assert.equal(decision.allowed, false);
  assert.deepEqual(decision.policies, ['contractors-no-delete']);
  assert.equal(decision.confirm, undefined);
});

test('staff deleting is permitted with a confirmation; the unnamed policy falls back to its Cedar-style id', () => {
  const engine = engineWith(POLICIES);
  const decision = engine.decide({ action: 'call_tool', access: keyAccess('k_staff', ['staff']), target: deleteFile, surface: 'mcp' });
  assert.equal(decision.allowed, true);
  assert.deepEqual(decision.confirm, { question: 'Delete this for good?', policy: 'policy3' });
});

test('arguments decide: write_file under /data only; default deny otherwise', () => {
  const engine = engineWith(POLICIES);
  const access = keyAccess('k_staff2', ['staff']);
  assert.equal(engine.decide({ action: 'call_tool', access, target: writeFile, arguments: { path: '/data/a.txt' }, surface: 'mcp' }).allowed, true);
  const outside = engine.decide({ action: 'call_tool', access, target: writeFile, arguments: { path: '/etc/passwd' }, surface: 'mcp' });
  assert.equal(outside.allowed, false);
  assert.deepEqual(outside.policies, []);
  assert.equal(engine.decide({ action: 'call_tool', access, target: writeFile, surface: 'mcp' }).allowed, false);
  // No hints: the spec's defaults (destructive, not read-only), so neither "reads" nor the contractors' forbid ignore it.
  assert.equal(engine.decide({ action: 'call_tool', access, target: tool('other'), surface: 'mcp' }).allowed, false);
});

test('the admin is a caller like any other; key alias, kind and groups are attributes and parents', () => {
  const engine = engineWith(`
@id("admin-only") permit (principal == Caller::"admin", action, resource);
@id("alias") permit (principal, action, resource) when { principal has key_alias && principal.key_alias == "ci" && principal.kind == "key" };`);
  assert.equal(engine.decide({ action: 'call_tool', access: Access.admin, target: deleteFile, surface: 'mcp' }).allowed, true);
  assert.equal(engine.decide({ action: 'call_tool', access: Access.open, target: deleteFile, surface: 'mcp' }).allowed, false);
  assert.deepEqual(engine.decide({ action: 'call_tool', access: keyAccess('k_ci', [], 'ci'), target: deleteFile, surface: 'mcp' }).policies, ['alias']);
  assert.equal(engine.callerOf(keyAccess('k_g', ['a', 'b'])).groups.join(), 'a,b');
});

test('a signed-in user is Caller::"user:<sub>" with groups from the groups claim and the listed claims', () => {
  const engine = engineWith(
    `@id("eng") permit (principal in Group::"eng", action, resource) when { principal.claims has dept && principal.claims.dept.contains("r&d") && principal.kind == "user" };`,
    { claims: ['dept'] },
  );
  const record = { keyId: 'user_x', secretHash: '', createdAt: 0, toolSearchEnabled: true } as KeyRecord;
  const user = Access.forUser(record, 'alice', { groups: ['eng'], dept: 'r&d' });
  assert.equal(engine.callerOf(user).id, 'user:alice');
  assert.equal(engine.decide({ action: 'call_tool', access: user, target: deleteFile, surface: 'mcp' }).allowed, true);
  const other = Access.forUser({ ...record }, 'bob', { groups: ['eng'], dept: 'sales' });
  assert.equal(engine.decide({ action: 'call_tool', access: other, target: deleteFile, surface: 'mcp' }).allowed, false);
});

test('surface is in the context', () => {
  const engine = engineWith(`@id("no-rest") forbid (principal, action, resource) when { context.surface == "rest" }; @id("all") permit (principal, action, resource);`);
  assert.equal(engine.decide({ action: 'call_tool', access: Access.admin, target: readFile, surface: 'mcp' }).allowed, true);
  assert.deepEqual(engine.decide({ action: 'call_tool', access: Access.admin, target: readFile, surface: 'rest' }).policies, ['no-rest']);
});

test('log mode decides but does not enforce', () => {
  const engine = engineWith(POLICIES, { mode: 'log' });
  const decision = engine.decide({ action: 'call_tool', access: keyAccess('k_c2', ['contractors']), target: deleteFile, surface: 'mcp' });
  assert.equal(decision.allowed, false);
  assert.equal(decision.enforced, false);
});

test('visibility by partial evaluation: hidden only when no arguments could permit', () => {
  const engine = engineWith(POLICIES);
  const contractor = keyAccess('k_c3', ['contractors']);
  const staff = keyAccess('k_s3', ['staff']);
  assert.equal(engine.mayPermit(contractor, deleteFile), false);
  assert.equal(engine.mayPermit(staff, deleteFile), true);
  // Permitted for some arguments only: listed.
  assert.equal(engine.mayPermit(contractor, writeFile), true);
  assert.equal(engine.mayPermit(staff, readFile), true);
  assert.equal(engine.mayPermit(staff, tool('other')), false);
  // The view key names the policy version and the caller's principal, groups and attributes.
  assert.notEqual(engine.viewKey(contractor), engine.viewKey(staff));
  assert.equal(engine.viewKey(keyAccess('k_s3b', ['staff'])).startsWith(engine.version), true);
});

test("visibility's context-free set answers as Cedar's partial evaluation with the context unknown", () => {
  const engine = engineWith(`${POLICIES}
@id("mixed") permit (principal in Group::"mixed", action, resource) when { !(context.surface == "rest") || resource.readOnlyHint };
@id("unless") forbid (principal in Group::"mixed", action, resource) unless { context.arguments has ok };
@id("if") permit (principal in Group::"iffy", action, resource) when { if context.surface == "mcp" then resource.name == "note" else false };`);
  const callers = [keyAccess('k_v1', ['contractors']), keyAccess('k_v2', ['staff']), keyAccess('k_v3', ['mixed']), keyAccess('k_v4', ['iffy']), Access.open];
  const targets = [deleteFile, writeFile, readFile, tool('note'), tool('other', { destructiveHint: false })];
  let hidden = 0;
  for (const access of callers) {
    for (const target of targets) {
      const fast = engine.mayPermit(access, target);
      assert.equal(fast, engine.partiallyEvaluated(access, target), `${engine.callerOf(access).groups.join()} ${target.id}`);
      if (!fast) hidden++;
    }
  }
  assert.ok(hidden >= 5, 'some pairs are hidden, so the comparison can fail');
});

test('decisions fixed per view and tool agree with Cedar asked afresh, for every argument and surface', () => {
  const text = `${POLICIES}
@id("mixed") permit (principal in Group::"mixed", action, resource) when { !(context.surface == "rest") || resource.readOnlyHint };
@id("unless") forbid (principal in Group::"mixed", action, resource) unless { context.arguments has ok };`;
  const engine = engineWith(text);
  const callers = [keyAccess('k_f1', ['contractors']), keyAccess('k_f2', ['staff']), keyAccess('k_f3', ['mixed']), Access.admin];
  const targets = [deleteFile, writeFile, readFile, tool('note')];
  const argumentSets = [undefined, { path: '/data/x' }, { path: '/etc/x' }, { ok: true, path: '/data/y' }];
  for (let round = 0; round < 2; round++) {
    for (const access of callers) {
      for (const target of targets) {
        for (const args of argumentSets) {
          for (const surface of ['mcp', 'rest'] as const) {
            const got = engine.decide({ action: 'call_tool', access, target, arguments: args, surface });
            const caller = engine.callerOf(access);
            const fresh = cedar.isAuthorized({
              principal: { type: 'Caller', id: caller.id },
              action: { type: 'Action', id: 'call_tool' },
              resource: { type: 'Tool', id: target.id },
              context: { arguments: cedarArguments(args), surface },
              policies: { staticPolicies: engine.policies!.policies },
              entities: [
                { uid: { type: 'Caller', id: caller.id }, attrs: { kind: caller.kind, claims: {} }, parents: caller.groups.map((id) => ({ type: 'Group', id })) },
                { uid: { type: 'Tool', id: target.id }, attrs: { name: target.name, server: target.server, readOnlyHint: target.annotations?.readOnlyHint ?? false, destructiveHint: target.annotations?.readOnlyHint ? false : (target.annotations?.destructiveHint ?? true), idempotentHint: false, openWorldHint: true }, parents: [] },
              ],
            });
            assert.equal(fresh.type, 'success');
            if (fresh.type !== 'success') continue;
            const where = `${caller.id} ${target.id} ${JSON.stringify(args)} ${surface}`;
            assert.equal(got.allowed, fresh.response.decision === 'allow', where);
            assert.deepEqual([...got.policies].sort(), [...fresh.response.diagnostics.reason].sort(), where);
          }
        }
      }
    }
  }
});

test('arguments become a Cedar record: floats, null and huge integers as strings; escapes cannot name entities', () => {
  assert.deepEqual(cedarArguments({ a: 1, b: 1.5, c: null, d: [1, 'x'], e: { f: true }, g: 2 ** 60 }), { a: 1, b: '1.5', c: 'null', d: [1, 'x'], e: { f: true }, g: String(2 ** 60) });
  assert.deepEqual(cedarArguments({ x: { __entity: { type: 'Caller', id: 'admin' } } }), { x: '{"__entity":{"type":"Caller","id":"admin"}}' });
  let deep: unknown = 'bottom';
  for (let i = 0; i < 40; i++) deep = { d: deep };
  const converted = JSON.stringify(cedarArguments({ deep: deep as Record<string, unknown> }));
  assert.ok(converted.length < 2_000);
  // A policy over an escaped value sees a string, never an entity.
  const engine = engineWith(`@id("x") permit (principal, action, resource) when { context.arguments has x && context.arguments.x == "{\\"__entity\\":{\\"type\\":\\"Caller\\",\\"id\\":\\"admin\\"}}" };`);
  assert.equal(engine.decide({ action: 'call_tool', access: Access.open, target: readFile, arguments: { x: { __entity: { type: 'Caller', id: 'admin' } } }, surface: 'mcp' }).allowed, true);
});

test('an invalid policy names the file, the line and Cedar\'s message', () => {
  const schema = cedarSchema();
  assert.throws(
    () => compilePolicies([{ file: 'p.cedar', text: 'permit (principal, action, resource);\n\npermit (principal, action resource);' }], schema),
    (error: unknown) => error instanceof PolicyLoadError && /^p\.cedar:3: .*unexpected token/.test(error.problems[0]!),
  );
  assert.throws(
    () => compilePolicies([{ file: 'q.cedar', text: 'permit (principal, action, resource)\n  when { resource.nme == "x" };' }], schema),
    (error: unknown) => error instanceof PolicyLoadError && /^q\.cedar:2: .*attribute `nme`.*did you mean `name`/.test(error.problems[0]!),
  );
  assert.throws(
    () => compilePolicies([{ file: 'r.cedar', text: '@id("a") permit (principal, action, resource);\n@id("a") forbid (principal, action, resource);' }], schema),
    (error: unknown) => error instanceof PolicyLoadError && /^r\.cedar:2: policy id "a" is already used \(r\.cedar:1\)/.test(error.problems[0]!),
  );
});

test('a reload with a bad edit keeps the last good set; a good edit is used from the next decision', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tr-policy-'));
  const file = path.join(dir, 'policies.cedar');
  writeFileSync(file, '@id("all") permit (principal, action, resource);');
  const service = await PolicyService.start({ settings: policySettingsSchema.parse({ files: [file] }), log, sighup: false });
  try {
    const ask = () => service.engine.decide({ action: 'call_tool', access: Access.open, target: readFile, surface: 'mcp' });
    assert.equal(ask().allowed, true);
    writeFileSync(file, 'permit (principal, action resource);');
    assert.equal(await service.reload('test'), false);
    assert.equal(ask().allowed, true);
    writeFileSync(file, '@id("none") forbid (principal, action, resource);');
    assert.equal(await service.reload('test'), true);
    assert.deepEqual(ask().policies, ['none']);
  } finally {
    service.close();
  }
  assert.equal(settings.mode, 'enforce');
});

test('no policy files: the service has no active engine (calls run as before)', async () => {
  const service = await PolicyService.start({ settings: policySettingsSchema.parse({}), log, sighup: false });
  assert.equal(service.engine.active, false);
  assert.equal(service.engine.mayPermit(Access.open, readFile), true);
  assert.equal(service.engine.decide({ action: 'call_tool', access: Access.open, target: readFile, surface: 'mcp' }).allowed, true);
});

test('an edited policy file is picked up without a signal (file watch)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tr-policy-watch-'));
  const file = path.join(dir, 'policies.cedar');
  writeFileSync(file, '@id("before") permit (principal, action, resource);');
  const service = await PolicyService.start({ settings: policySettingsSchema.parse({ files: [file] }), log, sighup: false });
  try {
    writeFileSync(file, '@id("after") permit (principal, action, resource);');
    const deadline = Date.now() + 10_000;
    let policies: string[] = [];
    while (Date.now() < deadline) {
      policies = service.engine.decide({ action: 'call_tool', access: Access.open, target: readFile, surface: 'mcp' }).policies;
      if (policies[0] === 'after') break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.deepEqual(policies, ['after']);
  } finally {
    service.close();
  }
});
