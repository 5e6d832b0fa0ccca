/**
 * Upstream MCP servers (src/mcp/upstream/): the manager of every connection, and the types the gateway and faces use.
 * One job per file there: transport.ts (making the transport), connection.ts (connecting, negotiating, reacting),
 * reconnection.ts (backoff and liveness), listing.ts (tools into the catalog), calls.ts (forwarding).
 */
export { UpstreamManager } from './upstream/manager.js';
export { UpstreamConnection } from './upstream/connection.js';
export { backoff } from './upstream/reconnection.js';
export * from './upstream/types.js';
