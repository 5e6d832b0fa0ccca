import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { Redis } from 'ioredis';
import { startRoundRobin, type Balancer } from '../helpers/balancer.js';
import { CliProcess } from '../helpers/ops-processes.js';
import { eventually, REDIS_URL, writeConfig } from '../helpers/processes.js';
import { completion, responseObject, startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';

/**
 * Issue 47: a proxied conversation behind a round-robin HAProxy without stickiness, over three `toolrouter serve`
 * processes on one Redis prefix. Every turn reaches another instance than the one before, so only state shared through
 * Redis keeps the tools block a stable prefix (turn n forwards turn n-1's tools first, in their order). One instance is
 * killed (SIGKILL) before turn four: the conversation goes on with its tools.
 */

const DOMAINS = [
  'email', 'calendar', 'weather', 'github', 'slack', 'database', 'payments', 'maps', 'translate', 'music',
  'photos', 'files', 'notes', 'tickets', 'crm', 'invoices', 'flights', 'hotels', 'recipes', 'stocks',
  'news', 'sports', 'video', 'podcast', 'shopping', 'fitness', 'banking', 'contacts', 'reminders', 'dns',
];
const ACTIONS = ['create', 'list', 'get', 'update', 'delete', 'search', 'export', 'import', 'share', 'archive'];

/** 300 tools: ten actions on each of thirty services. */
function chatTools(): OpenAI.Chat.Completions.ChatCompletionTool[] {
  return DOMAINS.flatMap((domain) =>
    ACTIONS.map((action) => ({
      type: 'function' as const,
      function: {
        name: `${domain}__${action}`,
        description: `${action} ${domain} items: ${action}s a ${domain} record of the user's ${domain} account`,
        parameters: { type: 'object', properties: { id: { type: 'string', description: `the ${domain} id` } } },
      },
    })),
  );
}

const TURNS = [
  'Send an email to Bob about the launch',
  'What is the weather in Lisbon tomorrow?',
  'Open a github issue for the login bug',
  'Book flights to Paris for next week',
  'Play some music while I work',
  'Show my stocks portfolio',
];

describe('a proxied conversation across three instances behind round-robin HAProxy', { timeout: 600_000 }, () => {
  const prefix = `trscale-${randomUUID().slice(0, 8)}`;
  let llm: StandInLlm;
  let balancer: Balancer;
  const apis: { process: CliProcess; url: string }[] = [];
  let answers = 0;

  before(async () => {
    llm = await startStandInLlm(async (req, res) => {
      answers++;
      const body = req.url.endsWith('/responses') ? { ...responseObject(`Answer ${answers}`), id: `resp_${answers}` } : completion(`Answer ${answers}`);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
    // allowedHosts '*': HAProxy's health check (balancer.ts, `option httpchk GET /health`) sends no Host header, which
    // an open service on loopback refuses; every instance would be taken out after its first check.
    const config = writeConfig({ port: 0, host: '127.0.0.1', redis: { url: REDIS_URL }, queue: { prefix }, upstreamLlmUrl: llm.url, security: { allowedHosts: ['*'] } });
    // Each is pushed as it is spawned, so `after` stops it even when another never comes up; a loaded machine needs
    // more than startServe's minute for three processes compiling the sources at once.
    const spawned = [0, 1, 2].map(() => new CliProcess(['--config', config, 'serve'], { LOG_LEVEL: 'debug' }));
    spawned.forEach((process) => apis.push({ process, url: '' }));
    const lines = await Promise.all(spawned.map((process) => process.waitFor((line) => line.msg === 'toolrouter listening', 300_000)));
    lines.forEach((line, i) => (apis[i]!.url = `http://127.0.0.1:${String(line.port)}`));
    // Checks every 2 s: on a loaded machine a 500 ms check read times out and takes a healthy instance out.
    balancer = await startRoundRobin(
      apis.map((api) => ({ host: '127.0.0.1', port: Number(new URL(api.url).port) })),
      { checkIntervalMs: 2_000 },
    );
    // HAProxy routes once its first checks passed: several answers in a row through it.
    await eventually(async () => {
      for (let i = 0; i < 3; i++) if (!(await fetch(`${balancer.url}/health`)).ok) return false;
      return true;
    }, (ok) => ok, 120_000);
  });

  after(async () => {
    await balancer?.stop();
    await Promise.all(apis.map((api) => api.process.stop()));
    await llm?.close();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  /** The tools the upstream got in its latest request, without the proxy's own search tool. */
  const forwardedTools = (): string[] => {
    const body = llm.received.at(-1)!.json as { tools?: { name?: string; function?: { name: string } }[] };
    return (body.tools ?? []).map((tool) => tool.function?.name ?? tool.name ?? '').filter((name) => name !== 'search_tools');
  };
  /** Proxied turns each instance served so far (its debug line per rewrite). */
  const served = () => apis.map((api) => api.process.logs.filter((line) => line.msg === 'tools rewritten').length);

  it('chat completions (openai client): six turns, every one a stable prefix of the next, one instance killed at turn four', async () => {
    const client = new OpenAI({ baseURL: `${balancer.url}/v1`, apiKey: 'sk-test' });
    const tools = chatTools();
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [];
    let previous: string[] = [];
    for (const [turn, text] of TURNS.entries()) {
      if (turn === 3) {
        // The instance that served the turn before is gone; the next turn lands on one that never saw this conversation.
        const before = served();
        const last = before.indexOf(Math.max(...before));
        apis[last]!.process.signal('SIGKILL');
        await apis[last]!.process.exited;
      }
      messages.push({ role: 'user', content: text });
      const reply = await client.chat.completions.create({ model: 'stand-in', messages, tools });
      const forwarded = forwardedTools();
      assert.ok(forwarded.length > 0 && forwarded.length < tools.length, `turn ${turn + 1} is trimmed (${forwarded.length} tools)`);
      assert.deepEqual(forwarded.slice(0, previous.length), previous, `turn ${turn + 1} forwards turn ${turn}'s tools first, in order`);
      assert.ok(forwarded.length > previous.length, `turn ${turn + 1} adds tools for "${text}"`);
      previous = forwarded;
      messages.push({ role: 'assistant', content: reply.choices[0]!.message.content });
    }
    // Round robin without stickiness: the turns were spread over the instances, none served them all.
    const counts = served();
    assert.ok(counts.filter((count) => count > 0).length >= 2, `turns spread over instances: ${counts.join(', ')}`);
    assert.ok(Math.max(...counts) < TURNS.length, `no instance served every turn: ${counts.join(', ')}`);
  });

  it('Responses API (previous_response_id): each turn, on another instance, keeps the tools of the one it continues', async () => {
    const client = new OpenAI({ baseURL: `${balancer.url}/v1`, apiKey: 'sk-test' });
    const tools: OpenAI.Responses.FunctionTool[] = chatTools().map((tool) => (tool as OpenAI.Chat.Completions.ChatCompletionFunctionTool).function).map((fn) => ({
      type: 'function',
      name: fn.name,
      description: fn.description ?? null,
      parameters: fn.parameters ?? null,
      strict: false,
    }));
    let previousId: string | undefined;
    let previous: string[] = [];
    const before = served();
    for (const [turn, text] of TURNS.slice(0, 4).entries()) {
      const reply = await client.responses.create({ model: 'stand-in', input: text, tools, ...(previousId ? { previous_response_id: previousId } : {}) });
      const forwarded = forwardedTools();
      assert.ok(forwarded.length > 0 && forwarded.length < tools.length, `turn ${turn + 1} is trimmed`);
      assert.deepEqual(forwarded.slice(0, previous.length), previous, `turn ${turn + 1} continues ${previousId} with its tools first`);
      previous = forwarded;
      previousId = reply.id;
    }
    const counts = served().map((count, i) => count - before[i]!);
    assert.ok(counts.filter((count) => count > 0).length >= 2, `turns spread over the live instances: ${counts.join(', ')}`);
  });
});
