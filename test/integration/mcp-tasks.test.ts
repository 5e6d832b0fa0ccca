import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  CreateMessageRequestSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  GetTaskResultSchema,
  ListTasksResultSchema,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { ADMIN_KEY, call, generateKey, mcpClientWithKey } from '../helpers/keys.js';
import { stdioFixtureServer, textOf, waitFor } from '../helpers/mcp.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startRouter, type RunningRouter } from '../helpers/router.js';

/** A task-augmented tools/call (MCP 2025-11-25) of the fixture's `slow` tool; answers the created task. */
async function startSlow(client: Client, ms: number) {
  const created = await client.request({ method: 'tools/call', params: { name: 'files__slow', arguments: { ms }, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
  return created.task;
}

const getTask = (client: Client, taskId: string) => client.request({ method: 'tasks/get', params: { taskId } }, GetTaskResultSchema);

describe('client-initiated tasks on a 2025-11-25 session: task-augmented tools/call, tasks/get, result, list, cancel, per key and session', () => {
  let api: RunningRouter;
  let mine: Client;
  let mineElsewhere: Client;
  let theirs: Client;
  let keyA: string;
  let keyB: string;

  before(async () => {
    api = await startRouter({
      adminKey: ADMIN_KEY,
      mcp: { servers: { files: stdioFixtureServer(), relay: { command: process.execPath, args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/relay-server.ts')], cwd: REPO_ROOT } } },
    });
    await waitFor('upstream connected', () => api.router.mcp.upstreams.status().every((server) => server.state === 'connected'), 20_000);
    const a = await generateKey(api.url, {});
    const b = await generateKey(api.url, {});
    keyA = a.key;
    keyB = b.key;
    mine = await mcpClientWithKey(api.url, a.key);
    mineElsewhere = await mcpClientWithKey(api.url, a.key);
    theirs = await mcpClientWithKey(api.url, b.key);
  });

  after(async () => {
    for (const client of [mine, mineElsewhere, theirs]) await client?.close().catch(() => {});
    await api?.close();
  });

  it('advertises tasks for tools/call, with list and cancel', () => {
    const tasks = mine.getServerCapabilities()?.tasks;
    assert.ok(tasks?.requests?.tools?.call, JSON.stringify(tasks));
    assert.ok(tasks?.list && tasks?.cancel, JSON.stringify(tasks));
  });

  it('answers at once with a working task; tasks/result brings the call result; tasks/get then says completed', async () => {
    const task = await startSlow(mine, 400);
    assert.equal(task.status, 'working');
    assert.ok(task.ttl !== null && task.ttl <= 60_000);
    const result = await mine.request({ method: 'tasks/result', params: { taskId: task.taskId } }, CallToolResultSchema, { timeout: 20_000 });
    assert.equal(textOf(result), 'waited 400 ms');
    assert.equal((await getTask(mine, task.taskId)).status, 'completed');
  });

  it('only the session that created a task sees it: another session of the same key and another key get "not found"', async () => {
    const task = await startSlow(mine, 50);
    for (const other of [mineElsewhere, theirs]) {
      // The code once: the SDK client puts "MCP error <code>: " before what the server sent, which must not carry it too.
      await assert.rejects(getTask(other, task.taskId), (error: Error) => error.message === 'MCP error -32602: Failed to retrieve task: Task not found');
      await assert.rejects(other.request({ method: 'tasks/result', params: { taskId: task.taskId } }, CallToolResultSchema), /not found/i);
      await assert.rejects(other.request({ method: 'tasks/cancel', params: { taskId: task.taskId } }, CancelTaskResultSchema), /not found/i);
      const listed = await other.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema);
      assert.ok(!listed.tasks.some((each) => each.taskId === task.taskId));
    }
    const listed = await mine.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema);
    assert.ok(listed.tasks.some((each) => each.taskId === task.taskId));
  });

  it('tasks/cancel stops a running task; its result says it was cancelled and it stays cancelled', async () => {
    const task = await startSlow(mine, 30_000);
    const cancelled = await mine.request({ method: 'tasks/cancel', params: { taskId: task.taskId } }, CancelTaskResultSchema);
    assert.equal(cancelled.status, 'cancelled');
    const result = await mine.request({ method: 'tasks/result', params: { taskId: task.taskId } }, CallToolResultSchema, { timeout: 5_000 });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /cancelled/);
    assert.equal((await getTask(mine, task.taskId)).status, 'cancelled');
  });

  it('a failing call ends as a completed task with an error result (a tool error, as without a task)', async () => {
    const created = await mine.request({ method: 'tools/call', params: { name: 'files__fail', arguments: {}, task: {} } }, CreateTaskResultSchema);
    const result = await mine.request({ method: 'tasks/result', params: { taskId: created.task.taskId } }, CallToolResultSchema, { timeout: 10_000 });
    assert.equal(result.isError, true);
  });

  it('an upstream question during a background task: the task goes input_required, tasks/result delivers it with the related task, the answer resumes the call', async () => {
    const asked: { message: string; related: unknown }[] = [];
    const asker = new Client({ name: 'tasks-asker', version: '1.0.0' }, { capabilities: { elicitation: { form: {} }, sampling: {} } });
    asker.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push({ message: request.params.message, related: request.params._meta?.[RELATED_TASK_META_KEY] });
      return { action: 'accept', content: { name: 'dana' } };
    });
    asker.setRequestHandler(CreateMessageRequestSchema, async (request) => {
      asked.push({ message: 'sampling', related: request.params._meta?.[RELATED_TASK_META_KEY] });
      return { role: 'assistant', model: 'dana-model', content: { type: 'text', text: 'short' } };
    });
    await asker.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${keyA}` } } }));
    try {
      // By hand, as the specification describes it: create, poll, see input_required, fetch the result.
      const created = await asker.request({ method: 'tools/call', params: { name: 'relay__ask_name', arguments: { label: 'bg' }, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
      const { taskId } = created.task;
      await waitFor('task input_required', async () => (await getTask(asker, taskId)).status === 'input_required');
      assert.equal(asked.length, 0, 'nothing is sent before the client asks for the result');
      const result = await asker.request({ method: 'tasks/result', params: { taskId } }, CallToolResultSchema, { timeout: 20_000 });
      assert.equal(textOf(result), 'bg: hello dana', JSON.stringify(result));
      assert.deepEqual(asked, [{ message: 'bg: what is your name?', related: { taskId } }]);
      assert.equal((await getTask(asker, taskId)).status, 'completed');

      // The SDK's task stream, through call_tool, with sampling.
      const messages: string[] = [];
      let final: unknown;
      for await (const message of asker.experimental.tasks.callToolStream(
        { name: 'call_tool', arguments: { name: 'relay__summarize', arguments: { text: 'a long story' } } },
        CallToolResultSchema,
        { task: { ttl: 60_000 } },
      )) {
        messages.push(message.type === 'taskStatus' ? `status ${message.task.status}` : message.type);
        if (message.type === 'result') final = message.result;
        if (message.type === 'error') assert.fail(String(message.error));
      }
      assert.equal(textOf(final), 'summary: short (model dana-model)', JSON.stringify(final));
      assert.equal(messages[0], 'taskCreated');
      assert.equal(messages.at(-1), 'result');
      assert.equal(asked.at(-1)?.message, 'sampling');
      assert.ok((asked.at(-1)?.related as { taskId?: string } | undefined)?.taskId, 'sampling carried its related task');
    } finally {
      await asker.close();
    }
  });

  it('a background task whose client did not declare the capability: the upstream is refused at once, the task ends with its answer', async () => {
    const created = await mine.request({ method: 'tools/call', params: { name: 'relay__ask_name', arguments: { label: 'bg' }, task: {} } }, CreateTaskResultSchema);
    const result = await mine.request({ method: 'tasks/result', params: { taskId: created.task.taskId } }, CallToolResultSchema, { timeout: 10_000 });
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.match(textOf(result), /did not declare elicitation \(form\)/);
  });

  it('a REST task cannot be asked anything: the upstream is refused with a reason naming REST', async () => {
    const started = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: keyA, body: { name: 'relay__ask_name', arguments: { label: 'rest' }, task: {} } });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const { taskId } = started.body.task;
    await waitFor('REST task done', async () => (await call(api.url, 'GET', `/mcp-rest/tasks/${taskId}`, { key: keyA })).body.task?.status === 'completed');
    const done = await call(api.url, 'GET', `/mcp-rest/tasks/${taskId}/result`, { key: keyA });
    assert.match(textOf(done.body.result), /REST: no client to ask/);
  });

  it('a session that closes takes its tasks with it', async () => {
    const closing = await mcpClientWithKey(api.url, ADMIN_KEY);
    const before = api.router.mcp.gateway.tasks.size;
    await startSlow(closing, 30_000);
    assert.equal(api.router.mcp.gateway.tasks.size, before + 1);
    await (closing.transport as StreamableHTTPClientTransport).terminateSession();
    await closing.close();
    await waitFor('tasks of the closed session dropped', () => api.router.mcp.gateway.tasks.size === before);
  });

  it('REST mirror: POST /mcp-rest/tools/call with task answers 202; the key polls, fetches the result, cancels; another key gets 404', async () => {
    const started = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: keyA, body: { name: 'files__slow', arguments: { ms: 300 }, task: {} } });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const { taskId } = started.body.task;
    const early = await call(api.url, 'GET', `/mcp-rest/tasks/${taskId}/result`, { key: keyA });
    assert.equal(early.status, 409, JSON.stringify(early.body));
    assert.equal((await call(api.url, 'GET', `/mcp-rest/tasks/${taskId}`, { key: keyB })).status, 404);
    assert.equal((await call(api.url, 'GET', `/mcp-rest/tasks/${taskId}/result`, { key: keyB })).status, 404);
    await waitFor('REST task completed', async () => (await call(api.url, 'GET', `/mcp-rest/tasks/${taskId}`, { key: keyA })).body.task?.status === 'completed');
    const done = await call(api.url, 'GET', `/mcp-rest/tasks/${taskId}/result`, { key: keyA });
    assert.equal(done.status, 200);
    assert.equal(textOf(done.body.result), 'waited 300 ms');
    // REST tasks are the key's own, apart from its MCP sessions' tasks.
    await assert.rejects(getTask(mine, taskId), /not found/i);
    const listed = await call(api.url, 'GET', '/mcp-rest/tasks', { key: keyA });
    assert.ok(listed.body.tasks.some((task: { taskId: string }) => task.taskId === taskId));
    assert.deepEqual((await call(api.url, 'GET', '/mcp-rest/tasks', { key: keyB })).body.tasks, []);

    const long = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: keyA, body: { name: 'files__slow', arguments: { ms: 30_000 }, task: { ttl: 60_000 } } });
    const cancelled = await call(api.url, 'POST', `/mcp-rest/tasks/${long.body.task.taskId}/cancel`, { key: keyA });
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.task.status, 'cancelled');
    assert.equal((await call(api.url, 'POST', `/mcp-rest/tasks/${long.body.task.taskId}/cancel`, { key: keyA })).status, 409);

    const bad = await call(api.url, 'POST', '/mcp-rest/tools/call', { key: keyA, body: { name: 'files__slow', arguments: { ms: 1 }, task: { ttl: 'soon' } } });
    assert.equal(bad.status, 400);
    assert.match(JSON.stringify(bad.body), /task/);
  });
});
