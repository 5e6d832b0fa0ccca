/** OAuth to upstream MCP servers: the per-server `auth` key and the `mcp.oauth` block. Assembled by `src/config/`. */
import { z } from 'zod';

/**
 * `auth: oauth` or `auth: {type: oauth, grant?, clientId?, clientSecret?, scope?}` on an HTTP server entry. Without
 * `clientId` the client registers itself (dynamic client registration, RFC 7591) with the server's authorization server.
 */
export const upstreamOAuthSchema = z
  .union(
    [
      z.literal('oauth'),
      z
        .object({
          type: z.literal('oauth'),
          grant: z.enum(['authorization_code', 'client_credentials']).default('authorization_code'),
          clientId: z.string().min(1).max(2_048).optional(),
          clientSecret: z.string().min(1).max(4_096).optional(),
          scope: z.string().min(1).max(4_096).optional(),
          /**
           * One grant per subject (a signed-in user's `sub`, or a key): each caller's calls act as their own account, and
           * a caller without a grant is sent the authorization URL (URL elicitation, -32042). The admin's grant lists the
           * tools. authorization_code only.
           */
          perUser: z.boolean().optional(),
        })
        .strict()
        .refine((auth) => !(auth.perUser && auth.grant === 'client_credentials'), { message: 'perUser needs the authorization_code grant: a user authorizes their own account', path: ['perUser'] }),
    ],
    { error: 'auth is "oauth" or {type: oauth, grant?: authorization_code | client_credentials, clientId?, clientSecret?, scope?, perUser?}' },
  )
  .transform((auth) => (auth === 'oauth' ? { type: 'oauth' as const, grant: 'authorization_code' as const } : auth));

export type UpstreamOAuthSettings = z.output<typeof upstreamOAuthSchema>;

export const oauthSettingsSchema = z
  .object({
    /**
     * Encrypts tokens at rest (AES-256-GCM) in Redis and in the state file; from TOOLROUTER_SECRET_KEY. Without it,
     * OAuth servers are not started when tokens would be stored (Redis or stateDir); in-memory tokens need none.
     */
    secretKey: z.string().min(16, 'must be at least 16 characters (TOOLROUTER_SECRET_KEY)').optional(),
    /**
     * Where the authorization server sends the browser back: this service's public URL + `/oauth/callback`. Unset: built
     * from the Host of the `authorize` request (right when the admin and the browser reach toolrouter at the same address).
     */
    callbackUrl: z.string().url().optional(),
    /**
     * The HTTPS URL at which this service's client ID metadata document (served at `/oauth/client-metadata.json`) is
     * reachable from the authorization servers. Set, an authorization server that takes metadata documents
     * (`client_id_metadata_document_supported`) gets this URL as the client ID instead of a dynamic registration.
     * Needs `callbackUrl` (the document names the redirect URI).
     */
    clientMetadataUrl: z
      .string()
      .url()
      .refine((url) => url.startsWith('https://') && new URL(url).pathname !== '/', 'must be an https URL with a path (the metadata document\'s own address)')
      .optional(),
    /** A refresh holds a per-server lock this long at most (Redis: `SET NX PX`); others wait for it, then re-read. */
    lockTtlMs: z.number().int().min(1_000).max(600_000).default(30_000),
    /** How long an `authorize` answer stays usable: the browser must come back within it. */
    pendingTtlMs: z.number().int().min(10_000).max(3_600_000).default(600_000),
    /**
     * A revoked per-user grant's tokens are revoked at the authorization server too (RFC 7009, where it advertises a
     * revocation endpoint); the revoke's answer waits this long for it at most.
     */
    revocationTimeoutMs: z.number().int().min(100).max(60_000).default(3_000),
    /** Upstream connections of per-user servers: at most this many open per server (least recently used close first). */
    maxUserConnections: z.number().int().min(1).max(10_000).default(64),
    /** A user's connection unused this long is closed (opened again on their next call). */
    userConnectionIdleMs: z.number().int().min(1_000).max(86_400_000).default(300_000),
  })
  .prefault({})
  .refine((oauth) => oauth.clientMetadataUrl === undefined || oauth.callbackUrl !== undefined, {
    message: 'clientMetadataUrl needs callbackUrl: the metadata document names the redirect URI',
    path: ['callbackUrl'],
  });

export type OAuthSettings = z.output<typeof oauthSettingsSchema>;
