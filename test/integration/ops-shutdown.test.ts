import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { connectHttpClient } from '../helpers/mcp.js';
import { startServe, startWorker, type CliProcess } from '../helpers/ops-processes.js';
import { eventually, REDIS_URL, writeConfig } from '../helpers/processes.js';
import { fixtureTools, startRouter, type RunningRouter } from '../helpers/router.js';
import { completion, startStandInLlm, type StandInLlm } from '../helpers/stand-in-llm.js';
import { syntheticTools } from '../helpers/synthetic.js';

interface Outcome {
  kind: string;
  startedAt: number;
  endedAt: number;
  status?: number;
  ok: boolean;
  error?: string;
}

/** Opens a new TCP connection (no pool), so "refused" means the listening socket is gone. */
function freshConnection(url: string): Promise<string> {
  return new Promise((resolve) => {
    const req = httpRequest(`${url}/health`, { agent: false }, (res) => {
      res.resume();
      resolve(`answered ${res.statusCode}`);
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    req.end();
  });
}

/** A PUT whose JSON body trickles in over `ms`: the server has accepted it long before it can answer. */
function slowPut(url: string, source: string, tools: unknown[], ms: number): Promise<Response> {
  const body = Buffer.from(JSON.stringify({ tools }));
  const parts = 10;
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent >= parts) return controller.close();
      await new Promise((resolve) => setTimeout(resolve, ms / parts));
      const size = Math.ceil(body.length / parts);
      controller.enqueue(body.subarray(sent * size, (sent + 1) * size));
      sent++;
    },
  });
  return fetch(`${url}/v1/catalog/sources/${source}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: stream,
    duplex: 'half',
  } as RequestInit);
}

describe('SIGTERM to `toolrouter serve` under load', () => {
  let llm: StandInLlm;
  let serve: CliProcess | undefined;
  let client: Client | undefined;
  after(async () => {
    await client?.close().catch(() => {});
    await serve?.stop();
    await llm?.close();
  });

  it('finishes every accepted request, refuses new connections, closes MCP sessions and exits 0', async () => {
    llm = await startStandInLlm();
    // Slow upstream: each chat completion takes 1.5 s, so several are in flight when the signal comes.
    llm.respond(async (_req, res) => {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion('slow but complete')));
    });
    const config = writeConfig({
      port: 0,
      host: '127.0.0.1',
      upstreamLlmUrl: llm.url,
      shutdownTimeoutMs: 20_000,
      shutdown: { drainMs: 0 },
      catalog: { sources: { fixture: fixtureTools() } },
    });
    const started = await startServe(config);
    serve = started.process;
    const { url } = started;
    await eventually(() => fetch(`${url}/ready`).then((r) => r.status), (status) => status === 200);
    // An open MCP session keeps an event stream open; shutdown must end it rather than wait for it.
    client = (await connectHttpClient(url)).client;

    const outcomes: Outcome[] = [];
    const run = async (kind: string, send: () => Promise<Response>, check: (status: number, body: string) => boolean) => {
      const startedAt = performance.now();
      try {
        const response = await send();
        const body = await response.text();
        outcomes.push({ kind, startedAt, endedAt: performance.now(), status: response.status, ok: check(response.status, body) });
      } catch (error) {
        const cause = (error as { cause?: { code?: string; message?: string } }).cause;
        outcomes.push({ kind, startedAt, endedAt: performance.now(), ok: false, error: cause?.code ?? cause?.message ?? String(error) });
      }
    };
    const search = () =>
      run(
        'search',
        () => fetch(`${url}/v1/tools/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'send an email' }) }),
        (status, body) => status === 200 && (JSON.parse(body) as { results: unknown[] }).results.length > 0,
      );
    const chat = () =>
      run(
        'chat',
        () =>
          fetch(`${url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'stand-in', messages: [{ role: 'user', content: 'hi' }] }),
          }),
        (status, body) => status === 200 && body.includes('slow but complete'),
      );
    let stopLoad = false;
    const loops = [
      ...Array.from({ length: 4 }, async () => {
        while (!stopLoad) await search();
      }),
      ...Array.from({ length: 3 }, async () => {
        while (!stopLoad) await chat();
      }),
    ];
    const upload = run('slow PUT', () => slowPut(url, 'uploaded', syntheticTools(2_000, 'upload'), 2_500), (status, body) => status === 200 && body.includes('catalogHash'));

    // Load for a while, then signal while chats and the upload are in the middle of their requests.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await eventually(() => llm.received.length, (n) => n >= 3);
    const signalledAt = performance.now();
    serve.signal('SIGTERM');
    await serve.waitFor((line) => line.msg === 'shutting down: finishing in-flight requests', 5_000);
    assert.equal(await freshConnection(url), 'ECONNREFUSED', 'a new connection after SIGTERM is refused');
    const exit = await serve.exited;
    stopLoad = true;
    await Promise.all([...loops, upload]);

    // Accepted = sent well before the signal (a request sent at the same instant may not have reached the server).
    const accepted = outcomes.filter((o) => o.startedAt < signalledAt - 100);
    const inFlight = accepted.filter((o) => o.endedAt > signalledAt);
    const failedAccepted = accepted.filter((o) => !o.ok);
    assert.deepEqual(failedAccepted, [], 'every accepted request got a complete, successful response');
    assert.ok(inFlight.filter((o) => o.kind === 'chat').length >= 3, `slow chats were in flight: ${JSON.stringify(inFlight)}`);
    assert.ok(inFlight.some((o) => o.kind === 'slow PUT'), 'the upload was in flight at the signal');
    assert.ok(accepted.filter((o) => o.kind === 'search').length > 20, 'steady search load before the signal');
    // Later requests either made it (kept-alive connection, answered with Connection: close) or were refused: no
    // request was answered with an error or cut off halfway.
    const late = outcomes.filter((o) => o.startedAt >= signalledAt - 100);
    for (const o of late) {
      if (o.status !== undefined) assert.ok(o.ok, `late request answered with an error: ${JSON.stringify(o)}`);
      else assert.match(o.error ?? '', /ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET|other side closed/, JSON.stringify(o));
    }
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.ok(serve.logs.some((line) => line.msg === 'shut down'));
    serve = undefined;
  });
});

describe('SIGTERM to `toolrouter worker` mid-build', () => {
  const prefix = `ops-shutdown-${process.pid}-${Date.now()}`;
  let api: RunningRouter | undefined;
  let worker: CliProcess | undefined;
  after(async () => {
    await api?.close();
    await worker?.stop();
  });

  it('finishes the job in hand, promotes its index, then exits 0', async () => {
    const settings = { redisUrl: REDIS_URL, queue: { prefix } };
    const started = await startWorker(writeConfig(settings));
    worker = started.process;
    api = await startRouter(settings);
    const put = await api.request('PUT', '/v1/catalog/sources/big', { tools: syntheticTools(6_000, 'big') });
    assert.equal(put.status, 200);
    const hash = put.body.catalogHash as string;
    await worker.waitFor((line) => line.msg === 'index build started' && line.catalogHash === hash);
    worker.signal('SIGTERM');
    const exit = await worker.exited;

    assert.deepEqual(exit, { code: 0, signal: null });
    const job = worker.logs.find((line) => line.msg === 'index build started' && line.catalogHash === hash)!.jobId;
    const finished = worker.logs.find((line) => line.msg === 'index build finished' && line.jobId === job);
    assert.ok(finished, 'the build in hand was finished before exiting');
    assert.equal(finished.outcome, 'built');
    assert.equal(finished.promoted, true);
    const stopping = worker.logs.findIndex((line) => line.msg === 'index worker stopping after the current job');
    assert.ok(stopping >= 0 && stopping < worker.logs.indexOf(finished), `the signal came while the job was running: ${JSON.stringify(worker.logs.map((l) => [l.msg, l.time]))}`);
    const status = await eventually(
      async () => (await api!.request('GET', '/v1/index/status')).body,
      (s) => s.indexedHash === hash,
    );
    assert.equal(status.tools, 6_000);
    worker = undefined;
  });
});
