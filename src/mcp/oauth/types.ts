import type { AuthProvider } from '@modelcontextprotocol/client';
import type { NeedsAuthorizationReason } from './store.js';

export type { NeedsAuthorizationReason } from './store.js';

/** Why an OAuth upstream waits for an admin to authorize it, as GET /v1/mcp/servers shows it. */
export interface AuthorizationNeeded {
  reason: NeedsAuthorizationReason;
  message: string;
}

/** What the upstream connection needs from the OAuth side (src/mcp/oauth/) for one HTTP server. */
export interface UpstreamAuth {
  /** For the SDK's HTTP client transport (`authProvider`): the bearer token per request, and the cure for a 401. */
  provider: AuthProvider;
  /** Set once a 401 could not be cured without the admin (no grant, refresh refused or failing); cleared by new tokens. */
  needed(): AuthorizationNeeded | undefined;
  /** Forgets where the authorization server was found (an admin's reconnect): the next OAuth step discovers it again. */
  forgetDiscovery?(): Promise<void>;
}
