/** toolrouter as an OAuth 2.1 resource server (YAML `auth.oauth`): schema and defaults. Assembled by `src/config/`. */
import { z } from 'zod';

/**
 * What a signed-in user may see, in the shape of `keys.defaults`: the settings a virtual key would get. A token's
 * subject is treated as a key made from one of these templates.
 */
export const keyTemplateSchema = z
  .object({
    allowed_servers: z.array(z.string().min(1)).optional(),
    allowed_tools: z.array(z.string().min(1)).optional(),
    tool_search_enabled: z.boolean().default(true),
    rpm_limit: z.number().int().min(1).optional(),
  })
  .strict();

export type KeyTemplate = z.output<typeof keyTemplateSchema>;

/** Signature algorithms accepted; `none` and HMAC never are (a shared secret would let anyone holding it mint users). */
export const TOKEN_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] as const;

export const identitySettingsSchema = z
  .object({
    /** The authorization server whose access tokens are accepted (`iss`); named in the protected resource metadata. */
    issuer: z.string().url(),
    /** What the token's `aud` must contain: usually this service's /mcp URL (the `resource` clients ask tokens for). */
    audience: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    /** Where the signing keys are; unset: from the issuer's metadata (RFC 8414, then OpenID discovery). */
    jwksUri: z.string().url().optional(),
    /** Scopes every token must carry (`scope` or `scp`); also advertised as `scopes_supported`. */
    requiredScopes: z.array(z.string().min(1).max(256)).max(64).default([]),
    /**
     * Scopes advertised as `scopes_supported` beside `requiredScopes`: what an MCP client asks the authorization server
     * for. Unset with no `requiredScopes`: `openid`, since a request with no scope at all is refused by common providers
     * (oidc-provider answers `access_denied`); set it to the scopes your provider defines for toolrouter.
     */
    scopes: z.array(z.string().min(1).max(256)).max(64).optional(),
    algorithms: z.array(z.enum(TOKEN_ALGORITHMS)).min(1).default(['RS256', 'ES256', 'EdDSA']),
    /**
     * The public URL of /mcp as clients reach it (the protected resource's identifier). Unset: built from each request's
     * scheme and Host (right unless a proxy rewrites them; set `security.trustProxy` behind one); then a loopback
     * `audience` (localhost, 127.0.0.1, [::1]) also accepts its other loopback names, the way a local client reaches it.
     */
    resource: z.string().url().optional(),
    /** What a token's subject may see when no claim rule below matches; unset: `keys.defaults`. */
    defaultKey: keyTemplateSchema.optional(),
    /**
     * A claim (`groups`, `roles`: a string or a list of strings) → key template table; the first value with a template
     * decides. Tokens whose claim names no template get `defaultKey`.
     */
    claims: z
      .object({
        claim: z.string().min(1).max(256).default('groups'),
        keys: z.record(z.string().min(1), keyTemplateSchema),
      })
      .strict()
      .optional(),
    /** Leeway for `exp` and `nbf`, in seconds: clocks of the IdP and this host differ a little. */
    clockToleranceSeconds: z.number().int().min(0).max(300).default(5),
    /** After fetching the signing keys, an unknown `kid` fetches them again only after this long (rotation vs. floods). */
    jwksCooldownMs: z.number().int().min(0).max(3_600_000).default(30_000),
    /** Signing keys are fetched again this long after the last fetch, rotation or not. */
    jwksMaxAgeMs: z.number().int().min(1_000).max(86_400_000).default(600_000),
    /**
     * Stale-if-error: while the JWKS cannot be fetched (down, slow, erroring), the cached signing keys keep verifying
     * tokens for this long past `jwksMaxAgeMs` (refetched in the background meanwhile); 0: never past their age.
     */
    jwksMaxStaleMs: z.number().int().min(0).max(604_800_000).default(86_400_000),
  })
  .strict();

export type IdentitySettings = z.output<typeof identitySettingsSchema>;
