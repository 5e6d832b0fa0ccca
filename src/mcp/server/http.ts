import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { Router, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Access } from '../../auth/access.js';
import { accessOf } from '../../http/auth.js';
import { toRestError, type FaceErrorShape } from '../../http/errors.js';
import type { Metrics } from '../../metrics.js';
import type { McpGateway } from '../gateway/gateway.js';
import { modernHttpFace } from './modern.js';
import { createMcpServer } from './server.js';
import { StreamLimits } from './streams.js';

export interface McpHttpOptions {
  /** Closes sessions without requests or open streams for this long. */
  sessionIdleMs: number;
  maxSessions: number;
  /** Sessions one key (or, on an open service, one client address) may hold; the admin's do not count globally. */
  maxSessionsPerKey?: number;
  /** Sessions that made no request after initialize are closed after this long (a flood of bare sessions). */
  unusedSessionIdleMs?: number;
  /** Open listen and event streams per key (open service: per client address), and in total (the admin's not counted). */
  maxStreamsPerKey?: number;
  maxStreams?: number;
  metrics?: Metrics;
  log: Logger;
}

export interface McpHttpFace {
  router: Router;
  sessions(): number;
  close(): Promise<void>;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  /**
   * The caller that opened the session, as of its latest request (a key's permissions may be updated while the session
   * lives); every request on the session must come from that same caller.
   */
  caller: { access: Access };
  /** Requests and SSE streams in flight; a session with an open stream is not idle. */
  open: number;
  lastActive: number;
  /** Whom the session counts against for maxSessionsPerKey. */
  holder: string;
  /** Made a request after initialize. */
  used: boolean;
}

/**
 * The streamable HTTP face at /mcp, for every protocol revision on one endpoint. A request of the stateless 2026-07-28
 * revision (its `_meta` envelope names the revision) is served on its own by the v2 SDK (modern.ts), the caller's key
 * taken from that request. Everything else is 2025-era traffic (2025-11-25, 2025-06-18, 2025-03-26): stateful, as
 * below.
 *
 * 2025-era clients are stateful: each client gets a session (Mcp-Session-Id) with its own SDK server, because
 * the gateway pushes notifications/tools/list_changed, which needs a per-client GET event stream; stateless mode has no
 * channel for that. Sessions live in this process (behind a load balancer, route by the Mcp-Session-Id header), are
 * ended by DELETE, by idling, or by close().
 */
export function mcpHttpFace(gateway: McpGateway, options: McpHttpOptions): McpHttpFace {
  const router = Router();
  const sessions = new Map<string, Session>();
  /** Initializes in flight per holder. */
  const opening = new Map<string, number>();
  const log = options.log.child({ face: 'mcp-http' });
  const maxPerKey = options.maxSessionsPerKey ?? options.maxSessions;
  const unusedIdleMs = options.unusedSessionIdleMs ?? options.sessionIdleMs;

  const streamCaps = { perKey: options.maxStreamsPerKey ?? maxPerKey, total: options.maxStreams ?? options.maxSessions };
  const streams = new StreamLimits(streamCaps, options.metrics);
  // The SDK's own cap counts every listen stream; ours leaves the admin's out of the total, so it is the bound.
  const modern = modernHttpFace(gateway, log, { maxSubscriptions: streamCaps.total + streamCaps.perKey });

  /** Counts a request or stream as activity until its response ends. */
  const track = (session: Session, res: Response) => {
    session.open++;
    session.lastActive = Date.now();
    res.on('close', () => {
      session.open--;
      session.lastActive = Date.now();
    });
  };

  router.post('/mcp', async (req, res) => {
    const access = accessOf(res);
    const sessionId = req.header('mcp-session-id');
    // No session id and a 2026-07-28 envelope: stateless, served with this request's key.
    if (sessionId === undefined && (await modern.claims(req))) {
      if ((req.body as { method?: unknown } | undefined)?.method === 'subscriptions/listen') {
        const refused = streams.open('listen', holderOf(access, req), access.kind === 'admin', res);
        if (refused !== undefined) return jsonRpcError(res, 429, -32000, refused, (req.body as { id?: string | number }).id ?? null);
      }
      return modern.serve(req, res, access);
    }
    const session = sessionId === undefined ? undefined : sessions.get(sessionId);
    if (session) {
      if (!ownedBy(session, access)) return notOwner(res);
      session.caller.access = access;
      session.used = true;
      track(session, res);
      await session.transport.handleRequest(req, res, req.body);
      return;
    }
    if (sessionId !== undefined) return jsonRpcError(res, 404, -32001, 'Session not found; start a new session with initialize');
    if (!isInitializeRequest(req.body)) {
      return jsonRpcError(res, 400, -32000, 'Bad Request: no valid Mcp-Session-Id header; the first request must be initialize');
    }
    // Per holder first, so one key's flood fills its own allowance and not everyone's; the admin is never locked out
    // by others' sessions.
    const holder = holderOf(access, req);
    // Initializes still in flight count too, or a burst of concurrent ones would all pass the check.
    const held = [...sessions.values()].reduce((count, other) => count + Number(other.holder === holder), opening.get(holder) ?? 0);
    if (held >= maxPerKey) return jsonRpcError(res, 429, -32000, `Too many open MCP sessions for this key (${maxPerKey}); close some (DELETE /mcp) or retry later`);
    if (access.kind !== 'admin' && sessions.size >= options.maxSessions) return jsonRpcError(res, 503, -32000, 'Too many open MCP sessions; retry later');

    // The session is bound to the key that opened it: its tools/list, searches and calls all see what that key may see.
    const caller = { access };
    const server = createMcpServer(gateway, log, () => caller.access);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      // Registered only once initialize succeeded, so half-open sessions never enter the map.
      onsessioninitialized: (id) => {
        const created: Session = { transport, caller, open: 0, lastActive: Date.now(), holder, used: false };
        sessions.set(id, created);
        track(created, res);
        log.debug({ session: id }, 'mcp session opened');
      },
    });
    // connect() chains the server's own close handling (which detaches it from the gateway) after this one.
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id !== undefined && sessions.delete(id)) log.debug({ session: id }, 'mcp session closed');
    };
    opening.set(holder, (opening.get(holder) ?? 0) + 1);
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } finally {
      const left = opening.get(holder)! - 1;
      if (left > 0) opening.set(holder, left);
      else opening.delete(holder);
    }
  });

  // GET opens the session's event stream (server → client notifications); DELETE ends the session.
  const existing = async (req: Request, res: Response) => {
    const sessionId = req.header('mcp-session-id');
    if (sessionId === undefined) return jsonRpcError(res, 400, -32000, 'Bad Request: missing Mcp-Session-Id header');
    const session = sessions.get(sessionId);
    if (!session) return jsonRpcError(res, 404, -32001, 'Session not found; start a new session with initialize');
    const access = accessOf(res);
    if (!ownedBy(session, access)) return notOwner(res);
    session.caller.access = access;
    session.used = true;
    if (req.method === 'GET') {
      const refused = streams.open('sse', session.holder, access.kind === 'admin', res);
      if (refused !== undefined) return jsonRpcError(res, 429, -32000, refused);
    }
    track(session, res);
    await session.transport.handleRequest(req, res);
  };
  router.get('/mcp', existing);
  router.delete('/mcp', existing);

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, session] of sessions) {
        const idleMs = session.used ? options.sessionIdleMs : Math.min(unusedIdleMs, options.sessionIdleMs);
        if (session.open > 0 || session.lastActive > now - idleMs) continue;
        log.info({ session: id }, 'closing idle mcp session');
        void session.transport.close();
      }
    },
    Math.max(100, Math.min(options.sessionIdleMs, unusedIdleMs, 120_000) / 2),
  );
  sweep.unref();

  return {
    router,
    sessions: () => sessions.size,
    close: async () => {
      clearInterval(sweep);
      await modern.close();
      // Closing a transport ends its open event streams, which would otherwise keep the HTTP server from closing.
      await Promise.all([...sessions.values()].map((session) => session.transport.close().catch(() => {})));
      sessions.clear();
    },
  };
}

/** Keys count their own sessions; open callers (no ADMIN_KEY) count per client address. */
function holderOf(access: Access, req: Request): string {
  return access.kind === 'open' ? `address:${req.ip ?? req.socket.remoteAddress ?? 'unknown'}` : ownerOf(access);
}

function ownerOf(access: Access): string {
  return access.key?.keyId ?? access.kind;
}

/** A session id alone is not a credential: a request on a session must carry the key that opened it. */
function ownedBy(session: Session, access: Access): boolean {
  return ownerOf(session.caller.access) === ownerOf(access);
}

function notOwner(res: Response): void {
  jsonRpcError(res, 403, -32003, 'this session was opened with another key; send the same key, or initialize a new session');
}

function jsonRpcError(res: Response, status: number, code: number, message: string, id: string | number | null = null): void {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id });
}

/** JSON-RPC error codes for what fails before the MCP server sees a request (HTTP status and headers stay as mapped). */
const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const INTERNAL_ERROR = -32603;

/**
 * Errors on /mcp raised before the MCP server (auth, rate limits, body parsing, JSON depth) in the shape MCP clients
 * read: a JSON-RPC error with `id: null`, toolrouter's code in `data.code`, the HTTP status and Retry-After as mapped.
 */
export const mcpErrorShape: FaceErrorShape = {
  matches: (path) => path === '/mcp' || path === '/mcp/',
  send: (res, error) => {
    const mapped = toRestError(error);
    const { code, message } = mapped.body.error;
    const rpcCode = code === 'invalid_json' ? PARSE_ERROR : mapped.status >= 500 ? INTERNAL_ERROR : INVALID_REQUEST;
    if (mapped.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(mapped.retryAfterSeconds));
    res.status(mapped.status).json({ jsonrpc: '2.0', id: null, error: { code: rpcCode, message, data: { code } } });
  },
};
