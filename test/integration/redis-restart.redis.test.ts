/**
 * Issue 54: three `toolrouter serve` processes behind a round-robin HAProxy (no stickiness) on a Redis of the test's
 * own, with its append-only file, as production runs it. Each instance reaches Redis through its own TCP link
 * (RedisLink), which can slow its commands down.
 *
 * - Redis restarted mid-work: a 2026-07-28 task and a 2025-11-25 task made just before the restart, whose upstream
 *   work ends while Redis is down, both end `completed` with their results; readers meanwhile get the retryable
 *   -32011, never Redis's text; a 1.x SDK session makes 6/6 calls across the restart; a proxied conversation keeps a
 *   growing tool prefix at every turn; a 2026-07-28 round asked before the restart is answered after it.
 * - An instance SIGKILLed the moment its answer to turn 3 reached the caller (not streamed, then streamed), while its
 *   Redis is slow (300 ms per command): turn 4, on another instance, continues turn 3's tools. The turn was filed
 *   before the answer's end went out (src/chat/core/proxy.ts settle); filed after it, the kill would lose it.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, GetTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import OpenAI from 'openai';
import { startRoundRobin, type Balancer } from '../helpers/balancer.js';
import { modernRpc, textOf, waitFor } from '../helpers/mcp.js';
import { CliProcess } from '../helpers/ops-processes.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { eventually, writeConfig } from '../helpers/processes.js';
import { PrivateRedis, RedisLink } from '../helpers/redis-server.js';
import { completion, startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const EVERYTHING = { command: process.execPath, args: [path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'], cwd: REPO_ROOT };

const DOMAINS = ['email', 'calendar', 'weather', 'github', 'slack', 'database', 'payments', 'maps', 'translate', 'music', 'flights', 'stocks', 'photos', 'notes', 'tickets'];
const ACTIONS = ['create', 'list', 'get', 'update', 'delete', 'search', 'export', 'share'];
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = DOMAINS.flatMap((domain) =>
  ACTIONS.map((action) => ({
    type: 'function' as const,
    function: {
      name: `${domain}__${action}`,
      description: `${action} ${domain} items: ${action}s a ${domain} record of the user's ${domain} account`,
      parameters: { type: 'object', properties: { id: { type: 'string', description: `the ${domain} id` } } },
    },
  })),
);
const TURNS = [
  'Send an email to Bob about the launch',
  'What is the weather in Lisbon tomorrow?',
  'Open a github issue for the login bug',
  'Book flights to Paris for next week',
  'Play some music while I work',
  'Show my stocks portfolio',
];

describe('Redis restarted (AOF) and instances killed, behind round-robin HAProxy', { timeout: 900_000 }, () => {
  const redis = new PrivateRedis({ persistent: true });
  const links = [0, 1, 2].map(() => new RedisLink(() => redis.port));
  const prefix = `trrestart-${randomUUID().slice(0, 8)}`;
  const apis: { process: CliProcess; url: string }[] = [];
  let llm: StandInLlm;
  let balancer: Balancer;
  let answers = 0;
  let id = 1;

  before(async () => {
    await redis.start();
    for (const link of links) await link.start();
    llm = await startStandInLlm(async (req, res) => {
      answers++;
      const text = `Answer ${answers}`;
      if (!(req.json as { stream?: boolean }).stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(completion(text)));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta: unknown, finish: string | null) =>
        `data: ${JSON.stringify({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model: 'stand-in', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: 'assistant', content: 'Answer ' }, null));
      res.write(chunk({ content: String(answers) }, null));
      res.write(chunk({}, 'stop'));
      res.end('data: [DONE]\n\n');
    });
    const spawned = links.map((link) => {
      const config = writeConfig({
        port: 0,
        host: '127.0.0.1',
        redis: { url: link.url },
        queue: { prefix },
        upstreamLlmUrl: llm.url,
        // Longer than the slowed link's round trips: the filing is what the kill test is about.
        chat: { fileTurnTimeoutMs: 5_000 },
        security: { allowedHosts: ['*'] },
        mcp: { search: false, callTimeoutMs: 60_000, servers: { every: EVERYTHING } },
      });
      return new CliProcess(['--config', config, 'serve'], { LOG_LEVEL: 'debug' });
    });
    spawned.forEach((process) => apis.push({ process, url: '' }));
    const lines = await Promise.all(spawned.map((process) => process.waitFor((line) => line.msg === 'toolrouter listening', 300_000)));
    lines.forEach((line, i) => (apis[i]!.url = `http://127.0.0.1:${String(line.port)}`));
    for (const { url } of apis) {
      await waitFor('upstream connected', async () => {
        const { servers } = (await (await fetch(`${url}/v1/mcp/servers`)).json()) as { servers: { state: string }[] };
        return servers.length === 1 && servers.every((server) => server.state === 'connected');
      }, 180_000);
    }
    balancer = await startRoundRobin(apis.map((api) => ({ host: '127.0.0.1', port: Number(new URL(api.url).port) })), { checkIntervalMs: 2_000 });
    await eventually(async () => {
      for (let i = 0; i < 3; i++) if (!(await fetch(`${balancer.url}/health`)).ok) return false;
      return true;
    }, (ok) => ok, 120_000);
  });

  after(async () => {
    await balancer?.stop();
    await Promise.all(apis.map((api) => api.process.stop()));
    await llm?.close();
    for (const link of links) await link.close();
    await redis.stop();
  });

  const rpc = (method: string, params: Record<string, unknown>) =>
    modernRpc(balancer.url, method, params, { id: id++, capabilities: { extensions: { [TASKS]: {} } }, client: 'restart-by-hand' });
  const forwardedTools = (): string[] => {
    const body = llm.received.at(-1)!.json as { tools?: { function?: { name: string } }[] };
    return (body.tools ?? []).map((tool) => tool.function?.name ?? '').filter((name) => name !== 'search_tools');
  };
  const served = () => apis.map((api) => api.process.logs.filter((line) => line.msg === 'tools rewritten').length);

  /** One proxied turn: the reply's text (streamed or not), and the tools the upstream got. */
  async function turn(client: OpenAI, messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[], stream: boolean): Promise<{ text: string; forwarded: string[] }> {
    if (!stream) {
      const reply = await client.chat.completions.create({ model: 'stand-in', messages, tools: TOOLS });
      return { text: reply.choices[0]!.message.content ?? '', forwarded: forwardedTools() };
    }
    let text = '';
    for await (const chunk of await client.chat.completions.create({ model: 'stand-in', messages, tools: TOOLS, stream: true })) text += chunk.choices[0]?.delta.content ?? '';
    return { text, forwarded: forwardedTools() };
  }

  it('Redis restarted mid-work: a 2026 task and a 2025 task end with their results, a session makes 6/6 calls, a conversation keeps its prefix', async () => {
    const session = new Client({ name: 'restart-session', version: '1.0.0' });
    await session.connect(new StreamableHTTPClientTransport(new URL(`${balancer.url}/mcp`)));
    const openai = new OpenAI({ baseURL: `${balancer.url}/v1`, apiKey: 'sk-test' });
    let calls = 0;
    const echo = async (n: number) => {
      const result = await session.callTool({ name: 'every__echo', arguments: { message: `m${n}` } });
      assert.match(textOf(result), new RegExp(`m${n}`));
      calls++;
    };
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [];
    let previous: string[] = [];
    const talk = async (index: number) => {
      messages.push({ role: 'user', content: TURNS[index]! });
      const { text, forwarded } = await turn(openai, messages, false);
      assert.ok(forwarded.length > 0 && forwarded.length < TOOLS.length, `turn ${index + 1} is trimmed`);
      assert.deepEqual(forwarded.slice(0, previous.length), previous, `turn ${index + 1} forwards turn ${index}'s tools first, in order`);
      previous = forwarded;
      messages.push({ role: 'assistant', content: text });
    };
    try {
      for (let n = 0; n < 3; n++) await echo(n);
      for (let index = 0; index < 3; index++) await talk(index);

      // Research takes four stages of a second: both end while Redis is down.
      const modern = (await rpc('tools/call', { name: 'every__simulate-research-query', arguments: { topic: 'restart-2026' } })).result;
      assert.equal(modern?.resultType, 'task', JSON.stringify(modern));
      const legacy = (await session.request({ method: 'tools/call', params: { name: 'every__simulate-research-query', arguments: { topic: 'restart-2025' }, task: { ttl: 600_000 } } }, CreateTaskResultSchema)).task;
      assert.equal(legacy.status, 'working');

      // A 2026-07-28 round asked before the restart, answered after it (wherever the retry lands).
      const round = (await modernRpc(balancer.url, 'tools/call', { name: 'every__trigger-elicitation-request', arguments: {} }, { id: id++, capabilities: { elicitation: { form: {} } }, client: 'restart-round' })).result;
      assert.equal(round?.resultType, 'input_required', JSON.stringify(round));
      const [askedKey] = Object.keys(round.inputRequests as Record<string, unknown>);

      await redis.stop();
      // A reader meanwhile: a retryable error of its own code, without Redis's words.
      const during = await rpc('tasks/get', { taskId: modern.taskId });
      assert.equal(during.error?.code, -32011, JSON.stringify(during));
      assert.equal(during.error.data?.retryable, true);
      assert.doesNotMatch(during.error.message, /ECONNREFUSED|Connection is closed|MaxRetriesPerRequest|max retries/i);
      // Longer than the research and than the instances' heartbeat TTL (5 s).
      await new Promise((resolve) => setTimeout(resolve, 7_000));
      await redis.start();

      const ended = await waitFor('the 2026 task completed after the restart', async () => {
        const got = await rpc('tasks/get', { taskId: modern.taskId }).catch(() => undefined);
        if (got?.error) assert.equal(got.error.code, -32011, JSON.stringify(got));
        return got?.result?.status === 'completed' || got?.result?.status === 'failed' ? got.result : undefined;
      }, 60_000);
      assert.equal(ended.status, 'completed', JSON.stringify(ended));
      assert.match(textOf(ended.result), /Research Report: restart-2026/);

      const legacyEnded = await waitFor('the 2025 task completed after the restart', async () => {
        const got = await session.request({ method: 'tasks/get', params: { taskId: legacy.taskId } }, GetTaskResultSchema).catch((error: { code?: number }) => {
          assert.equal(error.code, -32011, String(error));
          return undefined;
        });
        return got?.status === 'completed' || got?.status === 'failed' ? got : undefined;
      }, 60_000);
      assert.equal(legacyEnded.status, 'completed', JSON.stringify(legacyEnded));
      const result = await session.request({ method: 'tasks/result', params: { taskId: legacy.taskId } }, CallToolResultSchema, { timeout: 20_000 });
      assert.match(textOf(result), /Research Report: restart-2025/);

      const answered = await eventually(
        () => modernRpc(balancer.url, 'tools/call', { name: 'every__trigger-elicitation-request', arguments: {}, requestState: round.requestState, inputResponses: { [askedKey!]: { action: 'accept', content: { name: 'Erin Restart' } } } }, { id: id++, capabilities: { elicitation: { form: {} } }, client: 'restart-round' }),
        (reply) => reply.error?.code !== -32011,
        30_000,
      );
      assert.equal(answered.result?.resultType, 'complete', JSON.stringify(answered).slice(0, 400));
      assert.match(JSON.stringify(answered.result.content), /Erin Restart/);

      for (let n = 3; n < 6; n++) await eventually(() => echo(n).then(() => true, () => false), (ok) => ok, 30_000);
      assert.equal(calls, 6, 'six of six calls answered across the restart');
      for (let index = 3; index < TURNS.length; index++) await talk(index);
    } finally {
      await session.close();
    }
  });

  for (const stream of [false, true]) {
    it(`an instance killed the moment it answered turn 3 (${stream ? 'streamed' : 'not streamed'}): turn 4 elsewhere continues turn 3's tools`, async () => {
      const openai = new OpenAI({ baseURL: `${balancer.url}/v1`, apiKey: 'sk-test', maxRetries: 3 });
      for (const link of links) link.delayMs = 300;
      try {
        const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [];
        let third: string[] = [];
        for (let index = 0; index < 4; index++) {
          messages.push({ role: 'user', content: TURNS[index]! });
          const before = served();
          const { text, forwarded } = await turn(openai, messages, stream);
          messages.push({ role: 'assistant', content: text });
          if (index === 2) {
            // At once: whoever served it is killed before anything else happens.
            const after = served();
            const server = after.findIndex((count, i) => count > before[i]!);
            assert.ok(server >= 0, 'one instance served turn 3');
            apis[server]!.process.signal('SIGKILL');
            third = forwarded;
            await apis[server]!.process.exited;
          }
          if (index === 3) {
            assert.ok(third.length > 0);
            assert.deepEqual(forwarded.slice(0, third.length), third, 'turn 4 forwards turn 3\'s tools first, in order');
            assert.ok(forwarded.length > third.length, 'and adds its own');
          }
        }
      } finally {
        for (const link of links) link.delayMs = 0;
      }
    });
  }
});
