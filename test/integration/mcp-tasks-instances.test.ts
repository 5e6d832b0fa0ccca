/**
 * Tasks and input-required rounds of the 2026-07-28 revision across API instances (real processes on the suite's
 * Redis, one prefix): a task made on one instance is read on a second and cancelled or answered via a third; a v2 SDK
 * client whose requests alternate between two instances answers a round asked on one, resumed via the other; an
 * instance killed with SIGKILL leaves its task `failed` saying so, and its round a retryable error.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { modernRpc, textOf, waitFor } from '../helpers/mcp.js';
import { startRoundRobin } from '../helpers/balancer.js';
import { CliProcess } from '../helpers/ops-processes.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { REDIS_URL, writeConfig } from '../helpers/processes.js';

const MODERN = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const EVERYTHING = { command: process.execPath, args: [path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'], cwd: REPO_ROOT };
const RELAY = { command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/relay-server.ts')], cwd: REPO_ROOT };
const WITH_TASKS = { extensions: { [TASKS]: {} }, elicitation: { form: {} } };

describe('tasks and rounds across API instances (Redis)', () => {
  const prefix = `trtest-tasks-${randomUUID().slice(0, 8)}`;
  const instances: { process: CliProcess; url: string }[] = [];
  let id = 1;

  /** One JSON-RPC request on the stateless revision to one instance, its client capabilities declared. */
  async function rpc(url: string, method: string, params: Record<string, unknown>, capabilities: Record<string, unknown> = WITH_TASKS): Promise<any> {
    return modernRpc(url, method, params, { id: id++, capabilities, client: 'instances-by-hand' });
  }
  const taskOn = async (url: string, taskId: string) => (await rpc(url, 'tasks/get', { taskId })).result;

  before(async () => {
    const config = writeConfig({ redisUrl: REDIS_URL, port: 0, queue: { prefix }, mcp: { search: false, callTimeoutMs: 60_000, servers: { every: EVERYTHING, st: RELAY } } });
    // One after the other, with room: three processes each starting two upstreams on a loaded machine.
    for (let i = 0; i < 3; i++) {
      const child = new CliProcess(['--config', config, 'serve']);
      instances.push({ process: child, url: '' });
      const line = await child.waitFor((l) => l.msg === 'toolrouter listening', 240_000);
      instances[i]!.url = `http://127.0.0.1:${String(line.port)}`;
    }
    for (const { url } of instances) {
      await waitFor('upstreams connected', async () => {
        const { servers } = (await (await fetch(`${url}/v1/mcp/servers`)).json()) as { servers: { state: string }[] };
        return servers.length === 2 && servers.every((server) => server.state === 'connected');
      }, 180_000);
    }
  });

  after(async () => {
    await Promise.all(instances.map((instance) => instance.process.stop()));
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('a task made on one instance is polled on a second, answered via a third, and read to completion; another is cancelled via the third', async () => {
    const [a, b, c] = instances.map((instance) => instance.url) as [string, string, string];
    const created = (await rpc(a, 'tools/call', { name: 'every__simulate-research-query', arguments: { topic: 'gateways', ambiguous: true } })).result;
    assert.equal(created?.resultType, 'task', JSON.stringify(created));

    const asking = await waitFor('input_required, seen on the second instance', async () => {
      const got = await taskOn(b, created.taskId);
      return got?.status === 'input_required' ? got : undefined;
    }, 30_000);
    const [[key, request]] = Object.entries(asking.inputRequests as Record<string, { params: any }>) as [[string, { params: any }]];
    const choice = request.params.requestedSchema.properties.interpretation.oneOf[0].const as string;
    // Answered via the third: the answer reaches the first, where the upstream call waits.
    const ack = await rpc(c, 'tasks/update', { taskId: created.taskId, inputResponses: { [key]: { action: 'accept', content: { interpretation: choice } } } });
    assert.equal(ack.result?.resultType, 'complete', JSON.stringify(ack));
    const done = await waitFor('completed, seen on the second instance', async () => {
      const got = await taskOn(b, created.taskId);
      return got?.status === 'completed' ? got : undefined;
    }, 30_000);
    const report = (done.result.content as { text: string }[])[0]!.text;
    assert.match(report, /Research Report: gateways/);
    assert.ok(report.includes(choice), 'the answer given via the third instance reached the upstream');
    // The same record everywhere.
    assert.deepEqual(await taskOn(c, created.taskId), done);

    const other = (await rpc(a, 'tools/call', { name: 'every__simulate-research-query', arguments: { topic: 'cancel me', ambiguous: true } })).result;
    await waitFor('second task asks', async () => (await taskOn(a, other.taskId))?.status === 'input_required', 30_000);
    const cancelled = await rpc(c, 'tasks/cancel', { taskId: other.taskId });
    assert.equal(cancelled.result?.resultType, 'complete', JSON.stringify(cancelled));
    for (const url of [a, b, c]) assert.equal((await taskOn(url, other.taskId)).status, 'cancelled');
    // The work stopped where it ran: an answer now changes nothing, the task stays cancelled.
    await rpc(b, 'tasks/update', { taskId: other.taskId, inputResponses: { whatever: { action: 'decline' } } });
    assert.equal((await taskOn(a, other.taskId)).status, 'cancelled');
  });

  it('a v2 SDK client whose requests alternate between two instances: a round asked on one is answered and resumed via the other', async () => {
    const bases = [instances[0]!.url, instances[1]!.url];
    const served: string[] = [];
    let next = 0;
    // Round robin without stickiness, as a load balancer: every POST goes to the other instance than the last one.
    const alternate = (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const base = init?.method === 'POST' ? bases[next++ % 2]! : bases[0]!;
      if (init?.method === 'POST') served.push(base);
      return fetch(`${base}${url.pathname}${url.search}`, init);
    };
    const client = new Client({ name: 'rounds-across', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: MODERN } } });
    const asked: string[] = [];
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push(String(request.params.message));
      return { action: 'accept', content: { name: 'erin' } };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${bases[0]}/mcp`), { fetch: alternate as typeof fetch }));
    try {
      const before = served.length;
      for (const label of ['first', 'second']) {
        assert.equal(textOf(await client.callTool({ name: 'st__ask_name', arguments: { label } })), `${label}: hello erin`);
      }
      const calls = served.slice(before);
      assert.equal(calls.length, 4, 'each call took two requests: the call and its retry');
      assert.notEqual(calls[0], calls[1], 'the retry reached the other instance');
      assert.equal(asked.length, 2);
    } finally {
      await client.close();
    }
  });

  it('behind a round-robin HAProxy over the three: a v2 SDK client answers rounds asked on one instance on another, and a task is read to completion', async () => {
    const balancer = await startRoundRobin(instances.map(({ url }) => ({ host: '127.0.0.1', port: Number(new URL(url).port) })));
    const client = new Client({ name: 'rounds-balanced', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: MODERN } } });
    client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'erin' } }));
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(`${balancer.url}/mcp`)));
      // Each call is two requests (the call, then its retry with requestState), spread by the balancer: over six
      // calls, rounds are asked on one instance and answered on another.
      for (let i = 0; i < 6; i++) {
        assert.equal(textOf(await client.callTool({ name: 'st__ask_name', arguments: { label: `n${i}` } })), `n${i}: hello erin`);
      }
      const created = (await rpc(balancer.url, 'tools/call', { name: 'every__simulate-research-query', arguments: { topic: 'balanced', ambiguous: true } })).result;
      assert.equal(created?.resultType, 'task', JSON.stringify(created));
      const asking = await waitFor('input_required through the balancer', async () => {
        const got = await taskOn(balancer.url, created.taskId);
        return got?.status === 'input_required' ? got : undefined;
      }, 30_000);
      const [[key, request]] = Object.entries(asking.inputRequests as Record<string, { params: any }>) as [[string, { params: any }]];
      const choice = request.params.requestedSchema.properties.interpretation.oneOf[0].const as string;
      await rpc(balancer.url, 'tasks/update', { taskId: created.taskId, inputResponses: { [key]: { action: 'accept', content: { interpretation: choice } } } });
      const done = await waitFor('completed through the balancer', async () => {
        const got = await taskOn(balancer.url, created.taskId);
        return got?.status === 'completed' ? got : undefined;
      }, 30_000);
      assert.match((done.result.content as { text: string }[])[0]!.text, /Research Report: balanced/);
      for (const { url } of instances) assert.equal((await taskOn(url, created.taskId)).status, 'completed', `${url} reads it completed`);
    } finally {
      await client.close();
      await balancer.stop();
    }
  });

  it('a 2025-11-25 background task whose upstream elicits: tasks/result on another instance delivers the question, the answer reaches the instance running it', async () => {
    const bases = [instances[1]!.url, instances[2]!.url];
    const served: string[] = [];
    let next = 0;
    // Every POST to the other instance than the last one: the task's call on one, its tasks/result on the other.
    const alternate = (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const base = init?.method === 'POST' ? bases[next++ % 2]! : bases[0]!;
      if (init?.method === 'POST') served.push(base);
      return fetch(`${base}${url.pathname}${url.search}`, init);
    };
    const client = new LegacyClient({ name: 'task-elicits-across', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    const asked: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(String(request.params.message));
      return { action: 'accept', content: { name: 'erin' } };
    });
    await client.connect(new LegacyTransport(new URL(`${bases[0]}/mcp`), { fetch: alternate as typeof fetch }));
    try {
      const before = served.length;
      const { task } = await client.request({ method: 'tools/call', params: { name: 'st__ask_name', arguments: { label: 'across' }, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
      const result = await client.request({ method: 'tasks/result', params: { taskId: task.taskId } }, CallToolResultSchema, { timeout: 30_000 });
      assert.equal(textOf(result), 'across: hello erin');
      assert.equal(asked.length, 1, 'the question reached the client once');
      const posts = served.slice(before);
      assert.notEqual(posts[0], posts[1], 'tasks/result was served by another instance than the call');
    } finally {
      await client.close();
    }
  });

  it('an instance killed with SIGKILL: its task reads failed saying so on the others; its round answers a retryable error', async () => {
    const [a, b, c] = instances.map((instance) => instance.url) as [string, string, string];
    const task = (await rpc(a, 'tools/call', { name: 'every__simulate-research-query', arguments: { topic: 'doomed', ambiguous: true } })).result;
    await waitFor('task asks', async () => (await taskOn(b, task.taskId))?.status === 'input_required', 30_000);
    const round = (await rpc(a, 'tools/call', { name: 'st__ask_name', arguments: { label: 'doomed' } }, { elicitation: { form: {} } })).result;
    assert.equal(round?.resultType, 'input_required', JSON.stringify(round));
    const [inputKey] = Object.keys(round.inputRequests as Record<string, unknown>);

    instances[0]!.process.signal('SIGKILL');
    await instances[0]!.process.exited;

    const failed = await waitFor('task failed', async () => {
      const got = await taskOn(b, task.taskId);
      return got?.status === 'failed' ? got : undefined;
    }, 30_000);
    assert.match(failed.error.message, /instance running this task .* stopped before the task finished/);
    assert.equal(failed.error.code, -32603);
    assert.deepEqual((await taskOn(c, task.taskId)).error, failed.error, 'every instance reads the same failure');

    const retried = await rpc(b, 'tools/call', { name: 'st__ask_name', arguments: { label: 'doomed' }, requestState: round.requestState, inputResponses: { [inputKey!]: { action: 'accept', content: { name: 'erin' } } } }, { elicitation: { form: {} } });
    assert.equal(retried.error?.code, -32010, JSON.stringify(retried));
    assert.match(retried.error.message, /call the tool again without requestState/);
    assert.equal(retried.error.data?.retryable, true);
    // Called again without it, on a live instance: answered.
    const again = (await rpc(b, 'tools/call', { name: 'st__ask_name', arguments: { label: 'again' } }, { elicitation: { form: {} } })).result;
    assert.equal(again?.resultType, 'input_required');
  });
});
