import type { AuthProvider } from '@modelcontextprotocol/client';
import type { NeedsAuthorizationReason } from './store.js';

export type { NeedsAuthorizationReason } from './store.js';

/** Why an OAuth upstream waits for an admin to authorize it, as GET /v1/mcp/servers shows it. */
export interface AuthorizationNeeded {
  reason: NeedsAuthorizationReason;
  message: string;
}

/** What the upstream connection needs from the OAuth side (src/mcp/upstream/oauth/) for one HTTP server. */
export interface UpstreamAuth {
  /** For the SDK's HTTP client transport (`authProvider`): the bearer token per request, and the cure for a 401. */
  provider: AuthProvider;
  /** Set once a 401 could not be cured without the admin (no grant, refresh refused or failing); cleared by new tokens. */
  needed(): AuthorizationNeeded | undefined;
  /** Why this server must not start at all (no TOOLROUTER_SECRET_KEY for its tokens), if so: no retry can cure it. */
  refusal?(): string | undefined;
  /** Forgets where the authorization server was found (an admin's reconnect): the next OAuth step discovers it again. */
  forgetDiscovery?(): Promise<void>;
}

/** Where the authorization server sends the browser back (public; guarded by the single-use `state`). */
export const OAUTH_CALLBACK_PATH = '/oauth/callback';

/** A per-user server's grant for one subject, as its upstream connection uses it. */
export interface UserAuth extends UpstreamAuth {
  /** Whether a usable grant is stored; without one, calls are not sent (the caller is sent the authorization URL). */
  hasGrant(): Promise<boolean>;
}

/** What the upstream side needs from the OAuth side for servers with `perUser: true` (src/mcp/upstream/oauth/manager.ts). */
export interface UserGrants {
  perUser(server: string): boolean;
  userAuth(server: string, subject: string): UserAuth | undefined;
  /**
   * Starts a subject's browser step and returns toolrouter's connect link for it; `callbackUrl` is used unless
   * mcp.oauth.callbackUrl is set; `keyId`: the key that started it (binding.ts).
   */
  authorizeUser(server: string, subject: string, callbackUrl: string | undefined, keyId?: string): Promise<string>;
}
