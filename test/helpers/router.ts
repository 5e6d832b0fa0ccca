import type { Server } from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.js';
import { REPO_ROOT } from './paths.js';
import type { Tool } from '../../src/catalog/types.js';
import { createToolrouter, listen, type Toolrouter } from '../../src/server.js';

export interface RunningRouter {
  url: string;
  router: Toolrouter;
  close(): Promise<void>;
  /** Resolves once the live index covers the current catalog. */
  indexed(): Promise<void>;
  post(route: string, body: unknown, init?: RequestInit): Promise<{ status: number; body: any; headers: Headers }>;
  request(method: string, route: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }>;
}

export function fixtureTools(): Tool[] {
  return (JSON.parse(readFileSync(path.join(REPO_ROOT, 'test/fixtures/catalog.json'), 'utf8')) as { tools: Tool[] }).tools;
}

/** Resolves once the live index covers the router's current catalog. */
export async function untilIndexed(router: Toolrouter): Promise<void> {
  for (;;) {
    await router.pipeline.idle();
    if (router.indexes.current?.catalogHash === router.catalog.snapshot().catalogHash) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A real toolrouter on an ephemeral loopback port, with the real embedder on the offline model. */
export async function startRouter(overrides: Record<string, unknown> = {}): Promise<RunningRouter> {
  const config = loadConfig({}, { port: 0, host: '127.0.0.1', logLevel: 'silent', ...overrides });
  const router = await createToolrouter(config, { log: pino({ level: 'silent' }) });
  const server: Server = await listen(router);
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const request = async (method: string, route: string, body?: unknown) => {
    const response = await fetch(url + route, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Leave non-JSON bodies as text so assertions can show them.
    }
    return { status: response.status, body: parsed as any, headers: response.headers };
  };
  return {
    url,
    router,
    request,
    post: (route, body) => request('POST', route, body),
    indexed: () => untilIndexed(router),
    close: () => closeListening(router, server),
  };
}

/**
 * Ends an in-process router and its HTTP server: open connections cut, the server closed, then the router. Either may
 * be absent (a `before` that failed part-way), and what exists is still closed.
 */
export async function closeListening(router: Toolrouter | undefined, server: Server | undefined): Promise<void> {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await router?.close();
}
