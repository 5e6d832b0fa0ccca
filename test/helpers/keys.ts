import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const ADMIN_KEY = 'admin-key-for-tests-0123456789';

export interface Reply {
  status: number;
  body: any;
  headers: Headers;
}

/** One HTTP request with an optional toolrouter key (as a Bearer token). */
export async function call(baseUrl: string, method: string, route: string, options: { key?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(baseUrl + route, {
    method,
    headers,
    body: options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Non-JSON stays text, so a failing assertion shows it.
  }
  return { status: response.status, body, headers: response.headers };
}

/** Generates a virtual key with the admin key; fails the test if the service refuses. */
export async function generateKey(baseUrl: string, spec: Record<string, unknown>, adminKey = ADMIN_KEY): Promise<{ key: string; key_id: string }> {
  const reply = await call(baseUrl, 'POST', '/key/generate', { key: adminKey, body: spec });
  if (reply.status !== 200) throw new Error(`key generation failed: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body as { key: string; key_id: string };
}

/** A real MCP SDK client on /mcp presenting `key`. */
export async function mcpClientWithKey(baseUrl: string, key: string | undefined): Promise<Client> {
  const client = new Client({ name: 'keys-test', version: '1.0.0' });
  const headers: Record<string, string> = key === undefined ? {} : { authorization: `Bearer ${key}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers } }));
  return client;
}
