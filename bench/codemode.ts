/**
 * Code mode against one call per step (issue 41). Task: "three reads combined into one answer": for one customer, the
 * name (CRM), the unpaid invoice total (billing) and the open tickets (support), three stdio fixture servers
 * (test/fixtures/mcp/business-server.ts) behind a real toolrouter, driven by a real MCP SDK client. The model's turns
 * are scripted (the same search, the same calls); what is measured is what each way puts into the model's context:
 *
 * - call_tool per step: search_tools (full definitions), then call_tool three times; every result enters the context.
 * - code mode: search_tools (signatures, code mode's default), then one `execute` whose code makes the three calls and
 *   returns only the combination.
 *
 * Input tokens are summed over the model's turns (each turn re-reads the context so far: listed tools, the request and
 * everything since), o200k_base. Then the sandbox's own cost: an execution's start and run, cold (new thread) and warm.
 * Run: `node --import tsx bench/codemode.ts`. Timings are from a shared 2-core machine.
 */
import path from 'node:path';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Sandbox } from '../src/codemode/sandbox.js';
import { sandboxSettingsSchema } from '../src/codemode/settings.js';
import { ADMIN_KEY, generateKey, mcpClientWithKey } from '../test/helpers/keys.js';
import { REPO_ROOT } from '../test/helpers/paths.js';
import { startRouter } from '../test/helpers/router.js';

const CUSTOMER = 42;
const REQUEST = `For customer ${CUSTOMER}: what is their name, how much do they owe in unpaid invoices, and how many support tickets are open?`;
const SEARCH = 'customer record, invoices and support tickets of a customer';
const NEEDED = ['crm__get_customer', 'billing__list_invoices', 'support__list_tickets'];

const business = (role: string) => ({ command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/business-server.ts'), role], cwd: REPO_ROOT });
const tokens = (value: unknown) => encode(typeof value === 'string' ? value : JSON.stringify(value)).length;
interface Result {
  content?: { type: string; text?: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}
interface Invoice {
  status: string;
  amount: number;
}
const textOf = (result: Result) => (result.content ?? []).map((block) => block.text ?? '').join('\n');

const api = await startRouter({
  adminKey: ADMIN_KEY,
  mcp: { search: true, codeMode: true, servers: { crm: business('crm'), billing: business('billing'), support: business('support') } },
});
await api.router.mcp.upstreams.settled();
await api.indexed();
const stepKey = await generateKey(api.url, { code_mode_enabled: false });
const codeKey = await generateKey(api.url, { code_mode_enabled: true });

/** A scripted conversation: each model turn's input is everything so far; outputs are the turns' own tokens. */
class Transcript {
  private context: number;
  inputTokens = 0;
  outputTokens = 0;
  turns = 0;
  toolCalls = 0;
  resultTokens = 0;
  toolMs = 0;
  constructor(listed: unknown) {
    this.context = tokens(listed) + tokens(REQUEST);
  }
  /** One model turn that calls a tool; the result joins the context. */
  async call(client: Client, name: string, args: Record<string, unknown>): Promise<Result> {
    const output = tokens({ name, arguments: args });
    this.turn(output);
    const started = performance.now();
    const result = (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as Result;
    this.toolMs += performance.now() - started;
    if (result.isError) throw new Error(`${name} failed: ${textOf(result)}`);
    this.toolCalls++;
    const size = tokens(textOf(result));
    this.resultTokens += size;
    this.context += size;
    return result;
  }
  /** The model's last turn: the answer. */
  answer(text: string): void {
    this.turn(tokens(text));
  }
  private turn(output: number): void {
    this.turns++;
    this.inputTokens += this.context;
    this.outputTokens += output;
    this.context += output;
  }
}

async function searchNeeded(transcript: Transcript, client: Client): Promise<string> {
  const found = await transcript.call(client, 'search_tools', { query: SEARCH, top_k: 5 });
  const names = (found.structuredContent!.tools as { name: string }[]).map((tool) => tool.name);
  const missing = NEEDED.filter((name) => !names.includes(name));
  if (missing.length > 0) throw new Error(`the search did not find ${missing.join(', ')}: ${names.join(', ')}`);
  return names.join(', ');
}

// call_tool per step.
const stepClient = await mcpClientWithKey(api.url, stepKey.key);
const stepListed = (await stepClient.listTools()).tools;
const perStep = new Transcript(stepListed);
const stepFound = await searchNeeded(perStep, stepClient);
const customer = JSON.parse(textOf(await perStep.call(stepClient, 'call_tool', { name: 'crm__get_customer', arguments: { id: CUSTOMER } }))) as { name: string };
const invoices = JSON.parse(textOf(await perStep.call(stepClient, 'call_tool', { name: 'billing__list_invoices', arguments: { customer: CUSTOMER } }))) as Invoice[];
const tickets = JSON.parse(textOf(await perStep.call(stepClient, 'call_tool', { name: 'support__list_tickets', arguments: { customer: CUSTOMER } }))) as { status: string }[];
const expected = {
  name: customer.name,
  unpaid: Math.round(invoices.filter((i) => i.status === 'unpaid').reduce((sum, i) => sum + i.amount, 0) * 100) / 100,
  openTickets: tickets.filter((t) => t.status === 'open').length,
};
const answer = `${expected.name} owes EUR ${expected.unpaid} in unpaid invoices and has ${expected.openTickets} open support tickets.`;
perStep.answer(answer);

// Code mode.
const codeClient = await mcpClientWithKey(api.url, codeKey.key);
const codeListed = (await codeClient.listTools()).tools;
const coded = new Transcript(codeListed);
const codeFound = await searchNeeded(coded, codeClient);
const program = `const [customer, invoices, tickets] = await Promise.all([
  call_tool('crm__get_customer', {id: ${CUSTOMER}}),
  call_tool('billing__list_invoices', {customer: ${CUSTOMER}}).then(JSON.parse),
  call_tool('support__list_tickets', {customer: ${CUSTOMER}}).then(JSON.parse),
]);
const unpaid = invoices.filter((i) => i.status === 'unpaid').reduce((sum, i) => sum + i.amount, 0);
return {name: JSON.parse(customer).name, unpaid: Math.round(unpaid * 100) / 100, openTickets: tickets.filter((t) => t.status === 'open').length};`;
const executed = await coded.call(codeClient, 'execute', { code: program });
const result = executed.structuredContent!.result;
if (JSON.stringify(result) !== JSON.stringify(expected)) throw new Error(`code mode answered ${JSON.stringify(result)}, expected ${JSON.stringify(expected)}`);
coded.answer(answer);

// Overheads: an execute that makes one call, against the same call made directly (MCP round trip included in both).
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const p90 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.9)]!;
async function time(times: number, work: () => Promise<unknown>): Promise<number[]> {
  const spent: number[] = [];
  for (let i = 0; i < times; i++) {
    const started = performance.now();
    await work();
    spent.push(performance.now() - started);
  }
  return spent;
}
const direct = await time(20, () => codeClient.callTool({ name: 'crm__get_customer', arguments: { id: 1 } }));
const viaCode = await time(20, () => codeClient.callTool({ name: 'execute', arguments: { code: `return (await call_tool('crm__get_customer', {id: 1})).length` } }));
const trivial = await time(20, () => codeClient.callTool({ name: 'execute', arguments: { code: 'return 1' } }));

// The sandbox alone: a fresh thread per execution (cold) against a kept one (warm); a fresh engine either way.
const noHost = { call: async () => null, search: async () => [] };
const cold = new Sandbox(sandboxSettingsSchema.parse({ idleThreads: 0 }));
const coldRuns = await time(10, () => cold.run('return 1', noHost, { owner: 'bench' }));
const warm = new Sandbox(sandboxSettingsSchema.parse({ idleThreads: 1 }));
await warm.run('return 1', noHost, { owner: 'bench' });
const warmRuns = await time(20, () => warm.run('return 1', noHost, { owner: 'bench' }));
const loop = await time(5, () => warm.run('let x = 0; for (let i = 0; i < 1e6; i++) x += i; return x;', noHost, { owner: 'bench' }));
await cold.close();
await warm.close();

await stepClient.close();
await codeClient.close();
await api.close();

const row = (name: string, t: Transcript) =>
  `| ${name} | ${t.turns} | ${t.toolCalls} | ${t.inputTokens.toLocaleString('en')} | ${t.outputTokens} | ${t.resultTokens.toLocaleString('en')} | ${Math.round(t.toolMs)} |`;
const ms = (values: number[]) => `${median(values).toFixed(0)} / ${p90(values).toFixed(0)}`;
console.log(`Task: "${REQUEST}"`);
console.log(`Search "${SEARCH}" found: per step ${stepFound}; code mode ${codeFound}`);
console.log(`Listed tools: per step ${tokens(stepListed)} tokens (${stepListed.length} tools), code mode ${tokens(codeListed)} tokens (${codeListed.length} tools)`);
console.log('');
console.log('| Way | Model turns | Tool round trips | Input tokens (all turns) | Output tokens | Result tokens in context | Tool time (ms) |');
console.log('|---|---:|---:|---:|---:|---:|---:|');
console.log(row('call_tool per step', perStep));
console.log(row('code mode (execute)', coded));
console.log('');
console.log('| Overhead (median / p90 ms) | |');
console.log('|---|---|');
console.log(`| direct tools/call of crm__get_customer over /mcp | ${ms(direct)} |`);
console.log(`| execute making that one call | ${ms(viaCode)} |`);
console.log(`| execute "return 1" over /mcp | ${ms(trivial)} |`);
console.log(`| Sandbox.run "return 1", new thread each time (cold, tsx) | ${ms(coldRuns)} |`);
console.log(`| Sandbox.run "return 1", kept thread, fresh engine (warm) | ${ms(warmRuns)} |`);
console.log(`| Sandbox.run, a 1e6-iteration loop (warm) | ${ms(loop)} |`);
