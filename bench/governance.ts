/**
 * What governance adds to a tool call and to a search (issue 53): the governed path (src/mcp/gateway/governance.ts)
 * with 100 Cedar policies, the secret guardrail on arguments and results, and the audit trail (AuditLog over its memory store, records chained in the background), against the
 * same call without it; and the policy part of a search's visibility filter over a catalog, cold (first search of a
 * caller view: partial evaluation per tool) and warm (memoised, every later search).
 *
 * The upstream call is a resolved promise in both modes: this is the difference governance makes, not a call's cost.
 *
 *   node --import tsx bench/governance.ts [calls] [tools]     (defaults 3000 calls, 1000 tools)
 */
import os from 'node:os';
import pino from 'pino';
import { Access } from '../src/auth/access.js';
import type { KeyRecord } from '../src/auth/keys.js';
import { AuditLog } from '../src/audit/log.js';
import { MemoryAuditStore } from '../src/audit/store.js';
import { SecretScanner } from '../src/guardrails/secrets.js';
import { Governance } from '../src/mcp/gateway/governance.js';
import { PolicyEngine } from '../src/policy/engine.js';
import { compilePolicies } from '../src/policy/load.js';
import { cedarSchema } from '../src/policy/schema.js';
import { policySettingsSchema } from '../src/policy/settings.js';
import type { PolicyTarget } from '../src/policy/types.js';

const calls = Number(process.argv[2] ?? 3000);
const toolCount = Number(process.argv[3] ?? 1000);

/** 100 policies of the shapes people write: per group and server, per tool, argument conditions, a few forbids. */
function policies(): string {
  const lines: string[] = [];
  for (let i = 0; i < 40; i++) lines.push(`@id("group-${i}") permit (principal in Group::"team${i}", action == Action::"call_tool", resource) when { resource.server == "service${i}" };`);
  for (let i = 0; i < 30; i++) lines.push(`@id("tool-${i}") permit (principal, action == Action::"call_tool", resource == Tool::"service${i}__action_${i % 10}");`);
  for (let i = 0; i < 20; i++) {
    lines.push(`@id("args-${i}") permit (principal in Group::"staff", action == Action::"call_tool", resource) when { resource.name == "write_${i}" && context.arguments has path && context.arguments.path like "/data/${i}/*" };`);
  }
  for (let i = 0; i < 9; i++) lines.push(`@id("forbid-${i}") forbid (principal in Group::"contractors${i}", action, resource) when { resource.destructiveHint };`);
  lines.push(`@id("reads") permit (principal, action == Action::"call_tool", resource) when { resource.readOnlyHint };`);
  return lines.join('\n');
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

function stats(times: number[]): string {
  const sorted = [...times].sort((a, b) => a - b);
  return `p50 ${percentile(sorted, 50).toFixed(3)} ms, p99 ${percentile(sorted, 99).toFixed(3)} ms`;
}

const settings = policySettingsSchema.parse({ files: ['bench.cedar'] });
const engine = new PolicyEngine(settings, pino({ level: 'silent' }));
const compiled = compilePolicies([{ file: 'bench.cedar', text: policies() }], cedarSchema());
engine.use(compiled);
// The real audit log: record() queues and returns; chaining and the store append run after, off the call.
const sink = new AuditLog({ store: new MemoryAuditStore(100_000), instance: 'bench', settings: { arguments: 'hash', queueSize: 1_000_000, required: false } });
const guard = new SecretScanner({ arguments: 'block', results: 'redact', maxBytes: 4 * 1024 * 1024 });
const governed = new Governance({ policy: engine, guard, audit: sink });
const access = Access.forKey({ keyId: 'k_bench', secretHash: 'x', createdAt: 0, toolSearchEnabled: true, metadata: { groups: ['staff', 'team3'] } } as KeyRecord);
const target: PolicyTarget = { id: 'service3__write_3', name: 'write_3', server: 'service3', annotations: { destructiveHint: false } };
const args = { path: '/data/3/report.txt', content: 'Quarterly numbers for the board, draft two.', overwrite: true };
const result = { content: [{ type: 'text', text: 'wrote 44 characters to /data/3/report.txt' }] };

async function time(run: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < 200; i++) await run();
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    await run();
    times.push(performance.now() - started);
  }
  return times;
}

// A call decided by policies that do not read the arguments (group-3 over server service3): fixed per view and tool.
const plainTarget: PolicyTarget = { id: 'service3__read_3', name: 'read_3', server: 'service3', annotations: { destructiveHint: false } };
const plain = await time(async () => result);
const full = await time(() => governed.run({ action: 'call_tool', access, target, arguments: args, surface: 'mcp', run: async () => result }));
const fullFixed = await time(() => governed.run({ action: 'call_tool', access, target: plainTarget, arguments: args, surface: 'mcp', run: async () => result }));
const policyOnly = new Governance({ policy: engine });
const decided = await time(() => policyOnly.run({ action: 'call_tool', access, target, arguments: args, surface: 'mcp', run: async () => result }));
const decidedFixed = await time(() => policyOnly.run({ action: 'call_tool', access, target: plainTarget, arguments: args, surface: 'mcp', run: async () => result }));
const guardOnly = new Governance({ guard });
const scanned = await time(() => guardOnly.run({ action: 'call_tool', access, target, arguments: args, surface: 'mcp', run: async () => result }));

// A search's policy filter: one mayPermit per candidate tool (memoised per view and tool).
const tools: PolicyTarget[] = Array.from({ length: toolCount }, (_, i) => ({ id: `service${i % 50}__action_${i}`, name: `action_${i}`, server: `service${i % 50}`, annotations: i % 3 === 0 ? { readOnlyHint: true } : {} }));
let started = performance.now();
let visible = 0;
for (const tool of tools) if (engine.mayPermit(access, tool)) visible++;
const coldMs = performance.now() - started;
const warm: number[] = [];
for (let round = 0; round < 50; round++) {
  started = performance.now();
  for (const tool of tools) engine.mayPermit(access, tool);
  warm.push(performance.now() - started);
}

const load = os.loadavg()[0]!.toFixed(1);
process.stdout.write(
  [
    `${Object.keys(compiled.policies).length} policies, ${calls} calls, ${os.cpus().length} cores, 1-minute load ${load} (shared machine: timings move with other work).`,
    '',
    '| per call | time |',
    '|---|---|',
    `| no governance (resolved upstream) | ${stats(plain)} |`,
    `| policy only, decided by the arguments (100 policies) | ${stats(decided)} |`,
    `| policy only, decided without the arguments (fixed per caller view and tool) | ${stats(decidedFixed)} |`,
    `| secret guardrail only (arguments + result) | ${stats(scanned)} |`,
    `| policy + guardrail + audit record, decided by the arguments | ${stats(full)} |`,
    `| policy + guardrail + audit record, decided without the arguments | ${stats(fullFixed)} |`,
    '',
    `Search filter over ${toolCount} tools (${visible} visible to the caller): first search of a caller view ${coldMs.toFixed(1)} ms ` +
      `(one context-free Cedar evaluation per tool, once per policy set and view), every later search ${stats(warm)} for the whole filter.`,
  ].join('\n') + '\n',
);
