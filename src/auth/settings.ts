/** Keys' and abuse limits' settings (YAML `keys`, `security`): schemas and defaults. Assembled by `src/config/`. */
import { z } from 'zod';
import { identitySettingsSchema } from './identity/settings.js';

/** Virtual API keys (POST /key/generate): what a new key gets when the request does not say. */
export const keysSettingsSchema = z
  .object({
    defaults: z
      .object({
        allowed_servers: z.array(z.string().min(1)).optional(),
        allowed_tools: z.array(z.string().min(1)).optional(),
        tool_search_enabled: z.boolean().default(true),
        rpm_limit: z.number().int().min(1).optional(),
        /** Lifetime of a new key, like "30d"; unset: keys do not expire. */
        duration: z.string().regex(/^\d{1,9}[smhd]$/, 'duration is a number and a unit: 30s, 15m, 12h, 30d').optional(),
      })
      .strict()
      .prefault({}),
  })
  .prefault({});

/** Limits against abuse; all of them apply to every face (REST, /mcp, chat proxy). */
export const securitySettingsSchema = z
  .object({
    /** Requests per minute per client address; 0: off. */
    perIpPerMinute: z.number().int().min(0).default(0),
    /** Failed key checks per minute per client address before it is refused (429) for the rest of the minute; 0: off. */
    authFailuresPerIpPerMinute: z.number().int().min(0).default(30),
    /** Client address from X-Forwarded-For (Express's `trust proxy`: true, a hop count, or addresses); only behind a proxy you run. */
    trustProxy: z.union([z.boolean(), z.number().int().min(0), z.string()]).default(false),
    /** GET /metrics without a key even when ADMIN_KEY is set (for a scraper on a private network). */
    publicMetrics: z.boolean().default(false),
    /**
     * Key lookups and rate counters wait at most this long for Redis; after a failure or timeout they use this
     * instance's memory for redisCooldownMs without asking Redis (so an outage costs one timeout, not one per request).
     */
    redisTimeoutMs: z.number().int().min(10).max(60_000).default(1_000),
    redisCooldownMs: z.number().int().min(0).max(600_000).default(5_000),
    /**
     * Open mode (no ADMIN_KEY) answers only requests whose Host is a loopback name or address (localhost, 127.x, ::1)
     * or the configured host: a web page rebinding a name of its own to 127.0.0.1 is refused. Names added here are
     * accepted too (a reverse proxy's name); "*" accepts any.
     */
    allowedHosts: z.array(z.string().min(1)).default([]),
    /** Open mode: origins (`https://app.example`) whose pages may send state-changing requests; the service's own always may. */
    allowedOrigins: z.array(z.string().regex(/^https?:\/\/[^/]+$/, 'an origin is scheme://host[:port], like https://app.example')).default([]),
  })
  .prefault({});

export type KeysSettings = z.infer<typeof keysSettingsSchema>;
export type KeyDefaults = KeysSettings['defaults'];
export type SecuritySettings = z.infer<typeof securitySettingsSchema>;

/** Who may call besides key holders (YAML `auth`): `oauth` makes toolrouter an OAuth 2.1 resource server (src/auth/identity/). */
export const authSettingsSchema = z
  .object({
    oauth: identitySettingsSchema.optional(),
  })
  .strict()
  .prefault({});

export type AuthConfig = z.infer<typeof authSettingsSchema>;
