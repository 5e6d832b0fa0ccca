import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { serveStdio as serveModernStdio } from '@modelcontextprotocol/server/stdio';
import { inspect, type InspectOptions } from 'node:util';
import type { Logger } from 'pino';
import { Access } from '../../auth/access.js';
import type { McpGateway } from '../gateway/gateway.js';
import type { UpstreamManager } from '../upstream/index.js';
import { createModernServer } from './modern.js';
import { InputRounds } from '../relay/rounds.js';
import { createMcpServer } from './server.js';
import { NO_SERVERS } from '../gateway/guidance.js';

/**
 * stdout carries the protocol; one stray console.log from a dependency would corrupt it. Call before loading anything
 * that might print. (The logger already writes to stderr.)
 */
export function reserveStdoutForProtocol(): void {
  const toStderr = (...args: unknown[]) => console.error(...args);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
  // OTEL_TRACES_EXPORTER=console prints spans with console.dir.
  console.dir = (item: unknown, options?: InspectOptions) => console.error(inspect(item, options));
}

/** `_meta` key by which a 2026-07-28 message names its revision (the per-request envelope). */
const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion';

/**
 * Whether the connection's first message opens the stateless revision: it carries the per-request envelope (a v2
 * client's `server/discover` probe, or any request of a client pinned to 2026-07-28). An `initialize` without one, or
 * any other claim-less message, is a 2025-era client.
 */
export function opensModernRevision(message: JSONRPCMessage): boolean {
  const params = 'method' in message ? (message.params as { _meta?: Record<string, unknown> } | undefined) : undefined;
  return params?._meta?.[PROTOCOL_VERSION_META] !== undefined;
}

/**
 * The stdio pipe handed to whichever SDK serves the connection, once the first message has said which: messages that
 * arrive before that SDK has started are held, then delivered in order.
 */
class HandOver implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  private started = false;
  private readonly held: JSONRPCMessage[] = [];

  constructor(private readonly pipe: StdioServerTransport) {}

  async start(): Promise<void> {
    this.started = true;
    for (const message of this.held.splice(0)) this.onmessage?.(message);
  }

  deliver(message: JSONRPCMessage): void {
    if (this.started) this.onmessage?.(message);
    else this.held.push(message);
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.pipe.send(message);
  }

  close(): Promise<void> {
    return this.pipe.close();
  }
}

/**
 * Serves the MCP gateway on stdin/stdout for one client (`toolrouter stdio`), in the revision the client opens with:
 * 2026-07-28 (the v2 SDK's stdio entry, with list changes through subscriptions/listen) or 2025-11-25 and older (the
 * 1.x SDK's server, as before). Exits when the client closes stdin or on SIGINT/SIGTERM, closing upstream connections
 * (and their child processes) first.
 */
/** What stdio serving needs from the assembled router: its gateway, its logger, and a way to close it all. */
export interface StdioRouter {
  mcp: { gateway: McpGateway; upstreams: Pick<UpstreamManager, 'status'> };
  log: Logger;
  close(): Promise<void>;
}

export async function serveStdio(router: StdioRouter): Promise<void> {
  const { gateway } = router.mcp;
  const log = router.log;
  const pipe = new StdioServerTransport();
  const handOver = new HandOver(pipe);
  let closeServer: () => Promise<void> = async () => {};
  let stopping: Promise<void> | undefined;
  const stop = (reason: string) => {
    stopping ??= (async () => {
      log.info({ reason }, 'stdio session ended; shutting down');
      try {
        await closeServer().catch(() => {});
        await router.close();
      } catch (error) {
        log.error({ err: error }, 'error while closing');
      } finally {
        process.exit(0);
      }
    })();
    return stopping;
  };

  let opened = false;
  const open = (first: JSONRPCMessage) => {
    opened = true;
    if (opensModernRevision(first)) {
      // The client speaks 2026-07-28; 2025 openings are answered by the branch below, so this entry rejects them.
      // Upstream questions during a call come back as input-required rounds, as on /mcp.
      const rounds = new InputRounds(gateway.settings.callTimeoutMs);
      const handle = serveModernStdio(() => createModernServer(gateway, log, Access.open, true, rounds), {
        transport: handOver as never,
        legacy: 'reject',
        onerror: (error) => log.debug({ err: error }, 'mcp stdio (2026-07-28) error'),
      });
      closeServer = () => {
        rounds.close();
        return handle.close();
      };
      log.info({ revision: '2026-07-28' }, 'stdio client opened the stateless revision');
      return;
    }
    const server = createMcpServer(gateway, log);
    closeServer = () => server.close();
    void server.connect(handOver).catch((error: unknown) => log.error({ err: error }, 'cannot start the stdio MCP server'));
  };
  pipe.onmessage = (message) => {
    if (!opened) open(message);
    handOver.deliver(message);
  };
  pipe.onclose = () => {
    handOver.onclose?.();
    void stop('transport closed');
  };
  pipe.onerror = (error) => handOver.onerror?.(error);
  process.stdin.once('end', () => void stop('stdin closed'));
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
  await pipe.start();
  // One plain line a person reads in the client's MCP log, beside the JSON log lines.
  if (router.mcp.upstreams.status().length === 0) process.stderr.write(`toolrouter stdio: ${NO_SERVERS}\n`);
  log.info({ upstreams: router.mcp.upstreams.status().map((upstream) => upstream.name) }, 'toolrouter MCP gateway on stdio');
}
