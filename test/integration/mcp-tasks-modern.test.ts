import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { ADMIN_KEY, generateKey } from '../helpers/keys.js';
import { modernRpc, waitFor } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/** @modelcontextprotocol/server-everything from npm, over stdio: its simulate-research-query runs only as a task. */
const EVERYTHING = { command: process.execPath, args: [path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'], cwd: REPO_ROOT };
const MODERN = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';

/**
 * The 2026-07-28 tasks extension (io.modelcontextprotocol/tasks, SEP-2663) on toolrouter's modern face. The v2 SDK
 * client has no requester for it (a `resultType: "task"` is not a result it knows), so the client here speaks the
 * extension's wire by hand over real HTTP; the upstream is server-everything from npm, whose research tool runs only
 * as a task and, for an ambiguous topic, asks the user to clarify while it runs.
 */
describe('tasks extension on 2026-07-28: server-directed tasks, tasks/get, tasks/update, tasks/cancel, per key', () => {
  let api: RunningRouter;
  let mine: string;
  let theirs: string;
  let id = 1;

  /** One JSON-RPC request on the stateless revision; `capabilities` is the request's declared client capabilities. */
  async function rpc(key: string, method: string, params: Record<string, unknown>, capabilities: Record<string, unknown>): Promise<any> {
    return modernRpc(api.url, method, params, { id: id++, key, capabilities, client: 'tasks-by-hand' });
  }

  const WITH_TASKS = { extensions: { [TASKS]: {} }, elicitation: { form: {} } };
  const getTask = (key: string, taskId: string) => rpc(key, 'tasks/get', { taskId }, WITH_TASKS);

  before(async () => {
    api = await startRouter({ adminKey: ADMIN_KEY, mcp: { search: true, callTimeoutMs: 30_000, servers: { every: EVERYTHING } } });
    await waitFor('server-everything connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 30_000);
    mine = (await generateKey(api.url, {})).key;
    theirs = (await generateKey(api.url, {})).key;
  });

  after(async () => {
    await api?.close();
  });

  it('server/discover declares the extension (a real v2 SDK client sees it)', async () => {
    const client = new Client({ name: 'tasks-discover', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${mine}` } } }));
    try {
      assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
      assert.deepEqual((client.getServerCapabilities() as { extensions?: Record<string, unknown> }).extensions?.[TASKS], {});
    } finally {
      await client.close();
    }
  });

  it('a task-only tool is answered with a task; its question shows in tasks/get as an input request, tasks/update answers it, the result comes inline', async () => {
    const created = await rpc(mine, 'tools/call', { name: 'every__simulate-research-query', arguments: { topic: 'gateways', ambiguous: true } }, WITH_TASKS);
    const task = created.result;
    assert.equal(task?.resultType, 'task', JSON.stringify(created));
    assert.equal(task.status, 'working');
    assert.ok(task.taskId && task.createdAt && task.lastUpdatedAt, JSON.stringify(task));
    assert.equal(typeof task.ttlMs, 'number');
    assert.equal(typeof task.pollIntervalMs, 'number');
    assert.equal(task.content, undefined, 'a task, not a tool result');

    const asking = await waitFor('task input_required', async () => {
      const got = (await getTask(mine, task.taskId)).result;
      return got?.status === 'input_required' ? got : undefined;
    }, 20_000);
    assert.equal(asking.resultType, 'complete');
    const entries = Object.entries(asking.inputRequests as Record<string, { method: string; params: any }>);
    assert.equal(entries.length, 1, JSON.stringify(asking));
    const [key, request] = entries[0]!;
    assert.equal(request.method, 'elicitation/create');
    assert.match(request.params.message, /gateways/);
    const choice = request.params.requestedSchema.properties.interpretation.oneOf[0].const as string;

    // Asked again before answering: the same request under the same key.
    assert.deepEqual(Object.keys((await getTask(mine, task.taskId)).result.inputRequests), [key]);
    // Another key cannot see, answer or cancel it.
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const other = await rpc(theirs, method, { taskId: task.taskId, ...(method === 'tasks/update' ? { inputResponses: { [key]: { action: 'decline' } } } : {}) }, WITH_TASKS);
      assert.equal(other.error?.code, -32602, `${method}: ${JSON.stringify(other)}`);
      assert.match(other.error.message, /not found/i);
    }

    const ack = await rpc(mine, 'tasks/update', { taskId: task.taskId, inputResponses: { [key]: { action: 'accept', content: { interpretation: choice } } } }, WITH_TASKS);
    assert.equal(ack.result?.resultType, 'complete', JSON.stringify(ack));
    const done = await waitFor('task completed', async () => {
      const got = (await getTask(mine, task.taskId)).result;
      return got?.status === 'completed' ? got : undefined;
    }, 20_000);
    assert.equal(done.inputRequests, undefined);
    // The upstream ran it as a task of its own: that id is toolrouter's business, never the client's.
    assert.equal(done.result._meta?.['io.modelcontextprotocol/related-task'], undefined, JSON.stringify(done.result._meta));
    const report = (done.result.content as { type: string; text: string }[])[0]!.text;
    assert.match(report, /Research Report: gateways/);
    assert.ok(report.includes(choice), `the clarification reached the upstream: ${report.slice(0, 300)}`);
  });

  it('tasks/cancel stops a running task; the same call without the extension is a plain (synchronous) call', async () => {
    const created = await rpc(mine, 'tools/call', { name: 'call_tool', arguments: { name: 'every__simulate-research-query', arguments: { topic: 'cancelled' } } }, WITH_TASKS);
    assert.equal(created.result?.resultType, 'task', JSON.stringify(created));
    const ack = await rpc(mine, 'tasks/cancel', { taskId: created.result.taskId }, WITH_TASKS);
    assert.equal(ack.result?.resultType, 'complete', JSON.stringify(ack));
    assert.equal((await getTask(mine, created.result.taskId)).result.status, 'cancelled');

    const plain = await rpc(mine, 'tools/call', { name: 'every__echo', arguments: { message: 'hi' } }, WITH_TASKS);
    assert.equal(plain.result?.resultType, 'complete', 'a tool that is not a task-only job is answered directly');
    const without = await rpc(mine, 'tools/call', { name: 'every__simulate-research-query', arguments: { topic: 'direct' } }, { elicitation: { form: {} } });
    assert.equal(without.result?.resultType, 'complete', JSON.stringify(without).slice(0, 300));
    assert.match(JSON.stringify(without.result.content), /Research Report: direct/);
    // A plain call: no task at all as far as the client knows, so no task id (the upstream's would be unusable).
    assert.equal(without.result._meta?.['io.modelcontextprotocol/related-task'], undefined, JSON.stringify(without.result._meta));
  });

  it('tasks/* from a request that did not declare the extension: -32021 naming it; an unknown task: -32602', async () => {
    const refused = await rpc(mine, 'tasks/get', { taskId: 'whatever' }, {});
    assert.equal(refused.error?.code, -32021, JSON.stringify(refused));
    assert.deepEqual(refused.error.data, { requiredCapabilities: { extensions: { [TASKS]: {} } } });
    const unknown = await getTask(mine, 'no-such-task');
    assert.equal(unknown.error?.code, -32602);
    assert.match(unknown.error.message, /Task not found/);
  });

  it('tasks/list is not a method of the 2026-07-28 extension (SEP-2663 removed it): -32601', async () => {
    const listed = await rpc(mine, 'tasks/list', {}, WITH_TASKS);
    assert.equal(listed.error?.code, -32601, JSON.stringify(listed));
  });
});
