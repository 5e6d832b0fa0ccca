/**
 * What the chat proxy's search tool and sticky selection cost and save, against the stand-in LLM (so only the
 * proxy's own work is timed): prompt tokens of the tool definitions forwarded per turn of a three-turn conversation
 * over 200 LiveMCPBench tools, before (every tool) and after (trimmed, sticky, search tool included); and the latency a
 * search round adds to a request. Run: `node --import tsx bench/proxy-rounds.ts`. Timings are noisy on a shared machine.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Tool } from '../src/catalog/types.js';
import { TOOL_NAME_PATTERN } from '../src/catalog/validate.js';
import { loadCatalogFile } from '../src/eval/datasets.js';
import { totalTokens } from '../src/search/tokens.js';
import { startRouter } from '../test/helpers/router.js';
import { completion, jsonBody, postJson, scripted, startStandInLlm, toolCallCompletion } from '../test/helpers/stand-in-llm.js';
import { LIVEMCPBENCH } from './catalog.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
if (!existsSync(LIVEMCPBENCH)) throw new Error(`needs ${LIVEMCPBENCH}`);
const tools: Tool[] = loadCatalogFile(LIVEMCPBENCH).filter((tool) => TOOL_NAME_PATTERN.test(tool.name)).slice(0, 200);
const functions = tools.map((tool) => ({ type: 'function', function: { name: tool.name, description: tool.description ?? '', parameters: tool.inputSchema } }));
const names = new Set(tools.map((tool) => tool.name));
const queries = readFileSync(path.join(ROOT, 'test/fixtures/livemcpbench-queries.jsonl'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((line) => JSON.parse(line) as { query: string; expected: string[] })
  .filter((query) => query.expected.some((name) => names.has(name)));

const llm = await startStandInLlm();
const api = await startRouter({ upstreamLlmUrl: llm.url });
const url = `${api.url}/v1/chat/completions`;
const full = totalTokens(functions);
try {
  console.log(`${functions.length} LiveMCPBench tools, ${full} tokens of definitions (o200k_base, each definition as JSON)\n`);
  // The tool list's index is built by the first request that carries the list, then cached by the list's hash.
  const rewrite = `${api.url}/v1/tools/rewrite`;
  const rewriteBody = (i: number) => ({ model: 'm', messages: [{ role: 'user', content: `${queries[i % queries.length]!.query}` }], tools: functions });
  let started = performance.now();
  await postJson(rewrite, rewriteBody(0));
  const cold = performance.now() - started;
  const warm: number[] = [];
  for (let i = 1; i <= 30; i++) {
    started = performance.now();
    await postJson(rewrite, rewriteBody(i));
    warm.push(performance.now() - started);
  }
  const body = JSON.stringify(rewriteBody(0));
  console.log(`POST /v1/tools/rewrite (${(Buffer.byteLength(body) / 1024).toFixed(0)} KB body): first ${cold.toFixed(0)} ms (indexes the list), later p50 ${[...warm].sort((x, y) => x - y)[15]!.toFixed(1)} ms\n`);
  console.log('turn | tools forwarded | tokens before | tokens after | query');
  const messages: unknown[] = [];
  for (let turn = 0; turn < 3; turn++) {
    const { query } = queries[turn * 7]!;
    messages.push({ role: 'user', content: query });
    llm.reset();
    await postJson(url, { model: 'm', messages, tools: functions });
    const forwarded = llm.received[0]!.json.tools as unknown[];
    console.log(`${turn + 1} | ${forwarded.length} | ${full} | ${totalTokens(forwarded)} | ${query}`);
    messages.push({ role: 'assistant', content: 'Done.' });
  }

  // Latency: the same request answered at once, and with one search round first (warm tool-list index for both).
  const samples = { plain: [] as number[], search: [] as number[] };
  const runs = 40;
  for (let i = 0; i < runs; i++) {
    const body = { model: 'm', messages: [{ role: 'user', content: `${queries[i % queries.length]!.query} (${i})` }], tools: functions };
    for (const kind of ['plain', 'search'] as const) {
      llm.reset();
      if (kind === 'search') {
        llm.respond(scripted(jsonBody(() => toolCallCompletion('call_1', 'search_tools', { query: 'read a file from disk' })), jsonBody(() => completion())));
      }
      const started = performance.now();
      const answer = await postJson(url, { ...body, messages: [{ ...body.messages[0], content: `${body.messages[0]!.content} ${kind}` }] });
      samples[kind].push(performance.now() - started);
      if (answer.status !== 200) throw new Error(`status ${answer.status}`);
    }
  }
  const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.floor(q * (values.length - 1))]!;
  console.log(`\n${runs} requests each, stand-in LLM answering at once (ms): p50 / p90`);
  for (const kind of ['plain', 'search'] as const) console.log(`${kind}: ${quantile(samples[kind], 0.5).toFixed(1)} / ${quantile(samples[kind], 0.9).toFixed(1)}`);
  console.log(`added by one search round (p50): ${(quantile(samples.search, 0.5) - quantile(samples.plain, 0.5)).toFixed(1)} ms, plus one more upstream LLM call`);
} finally {
  await api.close();
  await llm.close();
}
