/**
 * Upstream MCP servers (src/mcp/upstream/): the manager of every connection, and the types the gateway and faces use.
 * One job per file there: transport.ts (making the transport), connection.ts (connecting, negotiating, reacting),
 * reconnection.ts (backoff and liveness), listing.ts (tools into the catalog), calls.ts (forwarding).
 */
export { UpstreamManager } from './manager.js';
export { UpstreamConnection } from './connection.js';
export { backoff } from './reconnection.js';
export * from './types.js';
