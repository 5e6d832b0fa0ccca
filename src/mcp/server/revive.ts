/**
 * Re-creating a 2025-era session on an instance that did not open it (src/mcp/server/http.ts): a fresh 1.x SDK transport
 * and server, put in the state the session's initialize left them in on the instance that served it.
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { SessionRecord } from '../../state/sessions.js';

/** The request id of the replayed initialize: a string no client request id can be mistaken for here (never sent). */
const REPLAYED = 'toolrouter-replayed-initialize';

/**
 * Replays the session's initialize into `server` (connected to `transport`) and marks `transport` initialized under
 * the session's id, so the next request on the id is served as on the instance that opened it.
 *
 * The server side goes through the SDK's public surface: the initialize request is handed to the transport's
 * `onmessage` (what the transport itself does with a request), the server's own initialize handler takes the client's
 * capabilities and info as it did the first time, and its answer is kept from the client (who had it already).
 *
 * The transport side cannot: the 1.x StreamableHTTPServerTransport sets its session id and `initialized` flag only while
 * answering an initialize POST, and has no public way to take over an existing session. This is the one place toolrouter
 * touches SDK internals (`_webStandardTransport`, its `sessionId` and `_initialized`); the check below refuses loudly
 * when the SDK's shape changes, and test/unit/mcp-session-revive.test.ts breaks with it.
 */
export async function reviveSession(server: Server, transport: StreamableHTTPServerTransport, record: SessionRecord): Promise<void> {
  markInitialized(transport, record.id);
  const onmessage = transport.onmessage;
  if (!onmessage) throw new Error('reviveSession: connect the server to the transport first');
  const send = transport.send.bind(transport);
  let answered: (message: JSONRPCMessage) => void = () => {};
  const answer = new Promise<JSONRPCMessage>((resolve) => (answered = resolve));
  transport.send = async (message, options) => {
    if ('id' in message && message.id === REPLAYED) return answered(message);
    return send(message, options);
  };
  try {
    onmessage({
      jsonrpc: '2.0',
      id: REPLAYED,
      method: 'initialize',
      params: { protocolVersion: record.protocolVersion, capabilities: record.clientCapabilities, clientInfo: record.clientInfo },
    });
    const reply = await answer;
    if ('error' in reply) throw new Error(`reviveSession: the replayed initialize failed: ${JSON.stringify(reply.error)}`);
  } finally {
    // Back to the prototype's send.
    delete (transport as { send?: unknown }).send;
  }
}

/** The SDK-internal part: see reviveSession. */
export function markInitialized(transport: StreamableHTTPServerTransport, sessionId: string): void {
  const inner = (transport as unknown as { _webStandardTransport?: { sessionId?: string; _initialized?: unknown } })._webStandardTransport;
  if (!inner || typeof inner._initialized !== 'boolean') {
    throw new Error('reviveSession: this version of @modelcontextprotocol/sdk keeps its transport state elsewhere; update src/mcp/server/revive.ts');
  }
  inner.sessionId = sessionId;
  inner._initialized = true;
  if (transport.sessionId !== sessionId) throw new Error('reviveSession: the transport did not take the session id; update src/mcp/server/revive.ts');
}
