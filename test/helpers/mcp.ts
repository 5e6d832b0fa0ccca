import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { REPO_ROOT } from './paths.js';

/** Config of an upstream that spawns the stdio fixture server. */
export function stdioFixtureServer(env: Record<string, string> = {}) {
  return {
    command: process.execPath,
    args: ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/mcp/stdio-server.ts')],
    cwd: REPO_ROOT,
    env,
  };
}

/** Polls until `check` returns a truthy value; fails with `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A real SDK client on toolrouter's /mcp that counts notifications/tools/list_changed. */
export async function connectHttpClient(baseUrl: string): Promise<{ client: Client; listChanged: () => number }> {
  let count = 0;
  const client = new Client({ name: 'gateway-test', version: '1.0.0' });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    count++;
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`)));
  return { client, listChanged: () => count };
}

/** The text of the first content block of a tool result. */
export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content[0]?.text ?? '';
}

/** Parses a JSON-RPC message from a streamable HTTP response, which may be JSON or a one-event SSE stream. */
export async function readJsonRpc(response: Response): Promise<any> {
  const text = await response.text();
  if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) return JSON.parse(text);
  const data = text
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trim())
    .find((line) => line.length > 0);
  return JSON.parse(data ?? 'null');
}

/** What one hand-spoken request of the stateless 2026-07-28 revision carries beside its method and params. */
export interface ModernRequestOptions {
  /** The JSON-RPC id. */
  id: number;
  /** The client capabilities the request declares (`_meta`). @defaultValue {} */
  capabilities?: Record<string, unknown>;
  /** An API key, sent as a bearer token. */
  key?: string;
  /** clientInfo.name. @defaultValue 'by-hand' */
  client?: string;
}

/**
 * One JSON-RPC request of the stateless 2026-07-28 revision, spoken by hand as the specification writes it (the
 * `_meta` envelope, `Mcp-Method` and `Mcp-Name` headers), for what no SDK client speaks yet (the tasks extension).
 */
export async function modernRpc(url: string, method: string, params: Record<string, unknown>, options: ModernRequestOptions): Promise<any> {
  const name = typeof params.taskId === 'string' ? params.taskId : typeof params.name === 'string' ? params.name : undefined;
  const response = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(options.key === undefined ? {} : { authorization: `Bearer ${options.key}` }),
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...(name === undefined ? {} : { 'mcp-name': name }),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: options.id,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: options.client ?? 'by-hand', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': options.capabilities ?? {},
        },
      },
    }),
  });
  return readJsonRpc(response);
}
