import { randomUUID } from 'node:crypto';
import type { QueuedMessage, TaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  isInitializeRequest,
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCMessage,
  type JSONRPCNotification,
  type MessageExtraInfo,
} from '@modelcontextprotocol/sdk/types.js';
import { Router, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Access } from '../../auth/access.js';
import { accessOf } from '../../http/auth.js';
import { toRestError, type FaceErrorShape } from '../../http/errors.js';
import type { Metrics } from '../../metrics.js';
import type { McpGateway } from '../gateway/gateway.js';
import { modernHttpFace } from './modern.js';
import { boundedRecord, MemorySessionStore, type SessionRecord, type SessionStore } from '../../state/sessions.js';
import { reviveSession } from './revive.js';
import { createMcpServer, type McpSessionState } from './server.js';
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
  /**
   * Where sessions are kept. A shared store (Redis) lets any instance serve any session: a request on a session this
   * instance does not hold re-creates it here from the store. @defaultValue a MemorySessionStore (this process only)
   */
  sessionStore?: SessionStore;
  /**
   * Where background tasks' queued messages wait for tasks/result, with a shared session store: shared too (Redis), so
   * tasks/result on any instance delivers what the upstream running the task on another one asks.
   * @defaultValue each session's own queue, in this process
   */
  taskMessages?: TaskMessageQueue;
  metrics?: Metrics;
  log: Logger;
}

export interface McpHttpFace {
  router: Router;
  /** Sessions held in this process (opened here, or re-created here for a request). */
  sessions(): number;
  close(): Promise<void>;
}

interface Session {
  transport: SessionTransport;
  /**
   * The caller that opened the session, as of its latest request (a key's permissions may be updated while the session
   * lives); every request on the session must come from that same caller.
   */
  caller: { access: Access };
  /** The key id or subject that opened it (what every request must carry). */
  owner: string;
  /** Requests and SSE streams in flight; a session with an open stream is not idle. */
  open: number;
  lastActive: number;
  /** Whom the session counts against for maxSessionsPerKey. */
  holder: string;
  /** Made a request after initialize. */
  used: boolean;
  /** GET event streams open here: the instance holding one sends the session's notifications. */
  listening: number;
  state: McpSessionState;
}

/**
 * The 1.x SDK's transport, with what is sent outside any request (the GET stream's notifications) handed to `route`
 * first: on an instance that does not hold the session's GET stream it goes through the session store to the one that
 * does. What relates to a request (a call's elicitation, sampling, progress, logs) rides that request's own response
 * stream, on whichever instance serves it, and is never routed.
 *
 * The client's answer to a request relayed during a call (elicitation, sampling, roots) comes back as a new POST,
 * which a load balancer may send to any instance. So the ids of requests sent to the client carry this copy's tag
 * (`<tag>:<id>`, unique across instances, where the SDK counts from 0 in every process), and an answer whose id this
 * copy did not send is passed to the instance that did (http.ts, `answers`).
 */
/** A request id tagged by a SessionTransport copy (`<8 hex>:<the SDK's id>`). */
const TAGGED = /^[0-9a-f]{8}:/;

class SessionTransport extends StreamableHTTPServerTransport {
  /** True when it took the notification (passed on, or dropped); false: send it here. */
  route: ((message: JSONRPCNotification) => Promise<boolean>) | undefined;
  /** Set when sessions are shared between instances (one process needs no tags). */
  tagRequests = false;
  private readonly tag = randomUUID().slice(0, 8);
  /** Requests sent to the client and not answered yet: wire id → the SDK's own id. */
  private readonly asked = new Map<string, string | number>();
  private handler: ((message: JSONRPCMessage, extra?: MessageExtraInfo) => void) | undefined;

  /**
   * Tags a request's id as sent by this copy without sending it (a background task's request queued for tasks/result,
   * which another instance may deliver): the client's answer then finds its way back here.
   */
  tagQueued(id: string | number): string | number {
    if (!this.tagRequests) return id;
    const wire = `${this.tag}:${String(id)}`;
    this.asked.set(wire, id);
    return wire;
  }

  /** The SDK's own id of a request this copy tagged (and still awaits an answer to); others as they are. */
  untag(id: string | number): string | number {
    return typeof id === 'string' ? (this.asked.get(id) ?? id) : id;
  }

  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    // Already tagged (a queued request of a task another copy runs, delivered here by tasks/result): sent as it is.
    if (this.tagRequests && isJSONRPCRequest(message) && !(typeof message.id === 'string' && TAGGED.test(message.id))) {
      const wire = `${this.tag}:${String(message.id)}`;
      this.asked.set(wire, message.id);
      return super.send({ ...message, id: wire }, options);
    }
    if (this.route && options?.relatedRequestId === undefined && isJSONRPCNotification(message) && (await this.route(message))) return;
    return super.send(message, options);
  }

  override set onmessage(handler: ((message: JSONRPCMessage, extra?: MessageExtraInfo) => void) | undefined) {
    this.handler = handler;
    super.onmessage = handler && ((message, extra) => this.receive(message, extra));
  }

  override get onmessage(): ((message: JSONRPCMessage, extra?: MessageExtraInfo) => void) | undefined {
    return super.onmessage;
  }

  /** Whether `id` answers a request this copy sent. */
  asks(id: unknown): boolean {
    return typeof id === 'string' && this.asked.has(id);
  }

  /** Takes a message as if it came in here (an answer passed on by another instance). */
  receive(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && typeof message.id === 'string' && this.asked.has(message.id)) {
      const id = this.asked.get(message.id)!;
      this.asked.delete(message.id);
      return this.handler?.({ ...message, id }, extra);
    }
    this.handler?.(message, extra);
  }

  /** Sends on this instance's GET stream as it is (a notification passed on by another instance). */
  deliver(message: JSONRPCMessage): Promise<void> {
    return super.send(message);
  }
}

/** The JSON-RPC answers (results, errors) a POST body carries when it carries nothing else; undefined otherwise. */
function answersIn(body: unknown): JSONRPCMessage[] | undefined {
  const messages = Array.isArray(body) ? body : [body];
  if (messages.length === 0 || !messages.every((message) => isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message))) return undefined;
  return messages as JSONRPCMessage[];
}

/**
 * The streamable HTTP face at /mcp, for every protocol revision on one endpoint. A request of the stateless 2026-07-28
 * revision (its `_meta` envelope names the revision) is served on its own by the v2 SDK (modern.ts), the caller's key
 * taken from that request. Everything else is 2025-era traffic (2025-11-25, 2025-06-18, 2025-03-26): stateful, as
 * below.
 *
 * 2025-era clients are stateful: each client gets a session (Mcp-Session-Id) with its own SDK server, because
 * the gateway pushes notifications/tools/list_changed, which needs a per-client GET event stream; stateless mode has no
 * channel for that. What a session is (revision, client capabilities, owner, log level, subscriptions) is kept in the
 * SessionStore; with Redis any instance serves any request, re-creating the session's SDK server from the store when it
 * does not hold it, so a load balancer needs no stickiness (docs/scaling.md). Sessions are ended by DELETE (on every
 * instance), by idling (the store's TTL), or by close() (a shared store keeps them for the other instances).
 */
export function mcpHttpFace(gateway: McpGateway, options: McpHttpOptions): McpHttpFace {
  const router = Router();
  const sessions = new Map<string, Session>();
  /** Re-creations in flight, so concurrent requests on one session re-create it once. */
  const reviving = new Map<string, Promise<Session | undefined>>();
  /** Initializes in flight per holder. */
  const opening = new Map<string, number>();
  const log = options.log.child({ face: 'mcp-http' });
  const maxPerKey = options.maxSessionsPerKey ?? options.maxSessions;
  const unusedIdleMs = options.unusedSessionIdleMs ?? options.sessionIdleMs;
  const store = options.sessionStore ?? new MemorySessionStore({ idleMs: options.sessionIdleMs, unusedIdleMs });
  /** Set by close(): a shared store keeps the sessions this instance closes on its way out. */
  let closing = false;

  const streamCaps = { perKey: options.maxStreamsPerKey ?? maxPerKey, total: options.maxStreams ?? options.maxSessions };
  const streams = new StreamLimits(streamCaps, options.metrics);
  // The SDK's own cap counts every listen stream; ours leaves the admin's out of the total, so it is the bound.
  const modern = modernHttpFace(gateway, log, { maxSubscriptions: streamCaps.total + streamCaps.perKey });

  // Messages from other instances: a session ended there (DELETE), a notification for the GET stream held here.
  const listening = store
    .listen((signal) => {
      const session = sessions.get(signal.session);
      if (!session) return;
      if (signal.type === 'ended') void session.transport.close();
      else if (signal.type === 'answer') {
        if (session.transport.asks(signal.message.id)) session.transport.receive(signal.message as JSONRPCMessage);
      } else if (session.listening > 0) void session.transport.deliver(signal.message as JSONRPCMessage).catch((error: unknown) => log.debug({ err: error }, 'notification not delivered'));
    })
    .catch((error: unknown) => log.error({ err: error }, 'cannot hear MCP session messages from other instances'));

  /** Counts a request or stream as activity until its response ends, and keeps the stored session alive as long. */
  const track = (id: string, session: Session, res: Response) => {
    session.open++;
    const started = (session.lastActive = Date.now());
    res.on('close', () => {
      session.open--;
      session.lastActive = Date.now();
      // The stored TTL runs from the request's start; a long one renews it at its end (the sweep does while it runs).
      if (!store.shared || session.lastActive - started > options.sessionIdleMs / 4) void store.touch(id).catch(() => {});
    });
  };

  /**
   * Where a notification sent outside any request goes (shared store only). List changes are worked out by every
   * instance holding the session from state they all share (catalog, keys, upstreams), so only the one holding the GET
   * stream sends them; what only this instance heard (a resource update of a subscription made here, a log message)
   * is passed on to the one holding the stream.
   */
  const routeOf =
    (id: string) =>
    async (message: JSONRPCNotification): Promise<boolean> => {
      if (message.method === 'notifications/resources/updated') {
        // Unsubscribed on another instance (or ended): the upstream subscription made here outlives it, its updates not.
        const record = await store.get(id).catch(() => undefined);
        if (!record?.subscriptions.includes(String(message.params?.uri))) return true;
      }
      if ((sessions.get(id)?.listening ?? 0) > 0) return false;
      if (message.method.endsWith('/list_changed')) return true;
      await store.publish({ type: 'notify', session: id, message: message as unknown as Record<string, unknown> }).catch((error: unknown) => log.debug({ err: error }, 'notification not passed on'));
      return true;
    };

  /** A transport and SDK server for a session (new, or re-created from its record), not yet connected. */
  const build = (access: Access, owner: string, holder: string, sessionId: () => string, onsessioninitialized?: (id: string) => Promise<void>) => {
    // The session is bound to the key that opened it: its tools/list, searches and calls all see what that key may see.
    const caller = { access };
    const state: McpSessionState = {
      // A shared store: closing this copy (idle here, shutdown) does not end the session elsewhere, nor its tasks.
      outlivesClose: store.shared,
      onLevel: async (level) => {
        const id = transport.sessionId;
        if (id !== undefined) await store.touch(id, { logLevel: level });
      },
      onSubscription: async ({ add, remove }) => {
        const id = transport.sessionId;
        const record = id === undefined ? undefined : await store.get(id);
        if (!record) return;
        const subscriptions = record.subscriptions.filter((uri) => uri !== add && uri !== remove);
        await store.touch(record.id, { subscriptions: add === undefined ? subscriptions : [...subscriptions, add] });
      },
    };
    // Shared sessions share their tasks' queued messages: a request queued here carries this copy's tag, so the client's
    // answer, posted to any instance, comes back here where the upstream waits for it.
    const late: { transport?: SessionTransport } = {};
    if (options.taskMessages && store.shared) state.taskMessages = taggedQueue(options.taskMessages, late);
    const server = createMcpServer(gateway, log, () => caller.access, state);
    const transport: SessionTransport = new SessionTransport({ sessionIdGenerator: sessionId, onsessioninitialized });
    late.transport = transport;
    transport.tagRequests = store.shared;
    const session: Session = { transport, caller, owner, open: 0, lastActive: Date.now(), holder, used: false, listening: 0, state };
    // connect() chains the server's own close handling (which detaches it from the gateway) after this one.
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id === undefined || sessions.get(id) !== session) return;
      sessions.delete(id);
      log.debug({ session: id }, 'mcp session closed here');
      // One process: the session ends with its server. Shared: it lives on in the store for the other instances (and
      // after a restart) until DELETE or its TTL ends it.
      if (!store.shared && !closing) void store.delete(id).catch(() => {});
    };
    return { server, transport, session };
  };

  /** Re-creates a stored session here, once however many requests ask at the same time; undefined when full. */
  const revive = (record: SessionRecord, access: Access): Promise<Session | undefined> => {
    let pending = reviving.get(record.id);
    if (pending) return pending;
    pending = (async () => {
      if (access.kind !== 'admin' && sessions.size >= options.maxSessions) return undefined;
      const { server, transport, session } = build(access, record.owner, record.holder, () => record.id);
      transport.route = routeOf(record.id);
      await server.connect(transport);
      await reviveSession(server, transport, record);
      session.used = record.used;
      sessions.set(record.id, session);
      log.debug({ session: record.id }, 'mcp session re-created here from the session store');
      return session;
    })().finally(() => reviving.delete(record.id));
    reviving.set(record.id, pending);
    return pending;
  };

  /**
   * The session a request names, checked against its key and refreshed: held here, or (shared store) re-created here.
   * Undefined once an error was answered.
   */
  const sessionFor = async (id: string, access: Access, res: Response): Promise<Session | undefined> => {
    let record: SessionRecord | undefined;
    try {
      record = await store.touch(id);
    } catch (error) {
      log.warn({ err: error, session: id }, 'the MCP session store did not answer');
      jsonRpcError(res, 503, -32000, 'MCP sessions are unavailable for a moment (the session store did not answer); retry later');
      return undefined;
    }
    const local = sessions.get(id);
    // One process: the session held here is the truth (the sweep ends it), as before there was a store.
    if (!record && (store.shared || !local)) {
      // Ended on another instance, or expired: this copy goes too.
      if (local) void local.transport.close();
      jsonRpcError(res, 404, -32001, 'Session not found; start a new session with initialize');
      return undefined;
    }
    if ((record?.owner ?? local?.owner) !== ownerOf(access)) {
      notOwner(res);
      return undefined;
    }
    if (record && !record.used) await store.touch(id, { used: true }).catch(() => {});
    const session = local ?? (store.shared && record ? await revive(record, access) : undefined);
    if (!session) {
      if (store.shared) jsonRpcError(res, 503, -32000, 'Too many open MCP sessions on this instance; retry later');
      else jsonRpcError(res, 404, -32001, 'Session not found; start a new session with initialize');
      return undefined;
    }
    session.caller.access = access;
    session.used = true;
    session.state.applyLevel?.(record?.logLevel);
    return session;
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
    if (sessionId !== undefined) {
      const session = await sessionFor(sessionId, access, res);
      if (!session) return;
      // The client's answers to what another instance asked it during a call: passed on to that instance.
      const answers = store.shared ? answersIn(req.body) : undefined;
      if (answers && !answers.every((answer) => session.transport.asks((answer as { id?: unknown }).id))) {
        for (const answer of answers) {
          if (session.transport.asks((answer as { id?: unknown }).id)) session.transport.receive(answer);
          else await store.publish({ type: 'answer', session: sessionId, message: answer as unknown as Record<string, unknown> }).catch((error: unknown) => log.warn({ err: error, session: sessionId }, 'could not pass an answer on to the instance that asked'));
        }
        res.status(202).end();
        return;
      }
      track(sessionId, session, res);
      await session.transport.handleRequest(req, res, req.body);
      return;
    }
    if (!isInitializeRequest(req.body)) {
      return jsonRpcError(res, 400, -32000, 'Bad Request: no valid Mcp-Session-Id header; the first request must be initialize');
    }
    const initialize = req.body.params;
    const holder = holderOf(access, req);
    const owner = ownerOf(access);
    const record = (id: string): SessionRecord => ({
      id,
      protocolVersion: SUPPORTED_PROTOCOL_VERSIONS.includes(initialize.protocolVersion) ? initialize.protocolVersion : LATEST_PROTOCOL_VERSION,
      clientInfo: initialize.clientInfo,
      clientCapabilities: initialize.capabilities as Record<string, unknown>,
      owner,
      holder,
      subscriptions: [],
      used: false,
      lastActive: Date.now(),
    });
    try {
      boundedRecord(record('check'));
    } catch (error) {
      return jsonRpcError(res, 400, -32602, `Invalid initialize: ${(error as Error).message}`, (req.body as { id?: string | number }).id ?? null);
    }
    // Per holder first, so one key's flood fills its own allowance and not everyone's; the admin is never locked out
    // by others' sessions. Counted on every instance (the store); initializes still in flight here count too, or a
    // burst of concurrent ones would all pass the check.
    let held: number;
    try {
      // One process: the sessions held here, as the sweep keeps them (the store's TTL may run out a little sooner).
      const stored = store.shared ? await store.count(holder) : [...sessions.values()].reduce((count, other) => count + Number(other.holder === holder), 0);
      held = stored + (opening.get(holder) ?? 0);
    } catch (error) {
      log.warn({ err: error }, 'the MCP session store did not answer');
      return jsonRpcError(res, 503, -32000, 'MCP sessions are unavailable for a moment (the session store did not answer); retry later');
    }
    if (held >= maxPerKey) return jsonRpcError(res, 429, -32000, `Too many open MCP sessions for this key (${maxPerKey}); close some (DELETE /mcp) or retry later`);
    if (access.kind !== 'admin' && sessions.size >= options.maxSessions) return jsonRpcError(res, 503, -32000, 'Too many open MCP sessions; retry later');

    // Stored before the SDK answers: a store that cannot take it (Redis away, or refusing writes when full) is a
    // retryable 503 here, never the SDK's "Parse error" carrying Redis's text. An initialize the SDK then refuses
    // takes its record away again (below).
    const id = randomUUID();
    try {
      await store.create(record(id));
    } catch (error) {
      log.warn({ err: error }, 'the MCP session store did not take a new session');
      res.setHeader('Retry-After', '1');
      return jsonRpcError(res, 503, -32000, 'MCP sessions are unavailable for a moment (the session store did not take the new session); retry later', (req.body as { id?: string | number }).id ?? null);
    }
    const { server, transport, session } = build(access, owner, holder, () => id, async (id) => {
      // Registered here only once initialize succeeded, so half-open sessions never enter the map.
      transport.route = store.shared ? routeOf(id) : undefined;
      sessions.set(id, session);
      track(id, session, res);
      log.debug({ session: id }, 'mcp session opened');
    });
    opening.set(holder, (opening.get(holder) ?? 0) + 1);
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } finally {
      const left = opening.get(holder)! - 1;
      if (left > 0) opening.set(holder, left);
      else opening.delete(holder);
      // An initialize that failed leaves no server attached to the gateway, and no record in the store.
      if (transport.sessionId === undefined || sessions.get(transport.sessionId) !== session) {
        void transport.close();
        void store.delete(id).catch((error: unknown) => log.debug({ err: error, session: id }, 'half-open session record not removed (it expires)'));
      }
    }
  });

  // GET opens the session's event stream (server → client notifications); DELETE ends the session.
  const existing = async (req: Request, res: Response) => {
    const sessionId = req.header('mcp-session-id');
    if (sessionId === undefined) return jsonRpcError(res, 400, -32000, 'Bad Request: missing Mcp-Session-Id header');
    const access = accessOf(res);
    if (req.method === 'DELETE') return end(sessionId, access, req, res);
    const session = await sessionFor(sessionId, access, res);
    if (!session) return;
    const refused = streams.open('sse', session.holder, access.kind === 'admin', res);
    if (refused !== undefined) return jsonRpcError(res, 429, -32000, refused);
    track(sessionId, session, res);
    session.listening++;
    res.on('close', () => session.listening--);
    await session.transport.handleRequest(req, res);
  };

  /** DELETE: ends the session in the store and on every instance holding it (a message to the others). */
  const end = async (id: string, access: Access, req: Request, res: Response) => {
    let record: SessionRecord | undefined;
    try {
      record = await store.get(id);
      if (record && record.owner !== ownerOf(access)) return notOwner(res);
      if (record) await store.delete(id);
    } catch (error) {
      log.warn({ err: error, session: id }, 'the MCP session store did not answer');
      return jsonRpcError(res, 503, -32000, 'MCP sessions are unavailable for a moment (the session store did not answer); retry later');
    }
    const local = sessions.get(id);
    if (!record && !local) return jsonRpcError(res, 404, -32001, 'Session not found; start a new session with initialize');
    if (local && local.owner !== ownerOf(access)) return notOwner(res);
    if (local) {
      track(id, local, res);
      await local.transport.handleRequest(req, res);
    } else {
      res.status(200).end();
    }
    // After this instance answered, so its own copy is closed by the SDK and not by the message.
    if (store.shared) void store.publish({ type: 'ended', session: id }).catch((error: unknown) => log.warn({ err: error, session: id }, 'could not tell the other instances a session ended'));
  };
  router.get('/mcp', existing);
  router.delete('/mcp', existing);

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, session] of sessions) {
        const idleMs = session.used ? options.sessionIdleMs : Math.min(unusedIdleMs, options.sessionIdleMs);
        if (session.open > 0) {
          // Busy (a long call, an open GET stream): not idle, wherever the next request lands.
          void store.touch(id).catch(() => {});
          continue;
        }
        if (session.lastActive > now - idleMs) continue;
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
      closing = true;
      clearInterval(sweep);
      await listening;
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

/**
 * A shared task message queue as one session copy uses it: requests it queues get its tag (tagQueued), and what it
 * takes back to clear a task's queue gets the SDK's own ids again (so the SDK rejects the requests still waiting).
 */
function taggedQueue(queue: TaskMessageQueue, copy: { transport?: SessionTransport }): TaskMessageQueue {
  const own = (message: QueuedMessage): QueuedMessage =>
    message.type === 'request' && copy.transport ? { ...message, message: { ...message.message, id: copy.transport.untag(message.message.id) } } : message;
  return {
    enqueue: (taskId, message, sessionId, maxSize) => {
      const tagged = message.type === 'request' && copy.transport ? { ...message, message: { ...message.message, id: copy.transport.tagQueued(message.message.id) } } : message;
      return queue.enqueue(taskId, tagged, sessionId, maxSize);
    },
    dequeue: (taskId, sessionId) => queue.dequeue(taskId, sessionId),
    dequeueAll: async (taskId, sessionId) => (await queue.dequeueAll(taskId, sessionId)).map(own),
  };
}
