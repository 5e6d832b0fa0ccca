/**
 * RFC 9728 protected resource metadata: what an MCP client fetches (from the `resource_metadata` of a 401's
 * WWW-Authenticate, or the well-known paths) to learn which authorization server issues tokens for toolrouter.
 */
import type { IdentitySettings } from './settings.js';

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';
/** The MCP endpoint toolrouter protects; its metadata also sits at the path-suffixed well-known URL (RFC 9728 §3.1). */
export const MCP_RESOURCE_PATH = '/mcp';

/** Where a request came in: scheme and Host as Express reads them (honouring `trust proxy`). */
export interface RequestOrigin {
  protocol: string;
  host: string | undefined;
}

export function originOf(request: RequestOrigin): string {
  return `${request.protocol}://${request.host ?? 'localhost'}`;
}

/** The resource identifier of /mcp: configured, or this request's origin + /mcp. */
export function mcpResource(settings: Pick<IdentitySettings, 'resource'>, request: RequestOrigin): string {
  return settings.resource ?? `${originOf(request)}${MCP_RESOURCE_PATH}`;
}

/** The metadata URL for a resource: the well-known path inserted between its origin and path. */
export function metadataUrlFor(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return `${url.origin}${PROTECTED_RESOURCE_PATH}${path}`;
}

/**
 * The scopes a client is told to ask for (`scopes_supported`; the MCP SDK client requests them all): the required ones,
 * then `scopes`; with neither, `openid`. A client that asks for no scope gets no token from common providers.
 */
export function advertisedScopes(settings: Pick<IdentitySettings, 'requiredScopes' | 'scopes'>): string[] {
  const extra = settings.scopes ?? (settings.requiredScopes.length > 0 ? [] : ['openid']);
  return [...new Set([...settings.requiredScopes, ...extra])];
}

export function protectedResourceMetadata(settings: Pick<IdentitySettings, 'issuer' | 'requiredScopes' | 'scopes'>, resource: string): Record<string, unknown> {
  const scopes = advertisedScopes(settings);
  return {
    resource,
    authorization_servers: [settings.issuer],
    bearer_methods_supported: ['header'],
    ...(scopes.length > 0 ? { scopes_supported: scopes } : {}),
    resource_name: 'toolrouter',
  };
}

const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'];

/**
 * The audiences a token may name. With `resource` set, `audience` as configured. Unset, the resource a client is told
 * is built from the Host it used, and a local client reaches toolrouter as localhost as often as 127.0.0.1: a loopback
 * audience URL also accepts the same URL under the other loopback names (the same service, on the same machine), so a
 * client on `localhost` is not refused "wrong audience" after signing in for `127.0.0.1`.
 */
export function acceptedAudiences(settings: Pick<IdentitySettings, 'audience' | 'resource'>): string[] {
  const configured = Array.isArray(settings.audience) ? settings.audience : [settings.audience];
  if (settings.resource !== undefined) return configured;
  const accepted = new Set(configured);
  for (const audience of configured) {
    let url: URL;
    try {
      url = new URL(audience);
    } catch {
      continue;
    }
    if (!LOOPBACK_HOSTS.includes(url.hostname) || (url.protocol !== 'http:' && url.protocol !== 'https:')) continue;
    for (const host of LOOPBACK_HOSTS) {
      const alias = new URL(audience);
      alias.hostname = host;
      // URL keeps the configured spelling otherwise (path, trailing slash): compared as strings by the verifier.
      accepted.add(audience.startsWith(url.origin) ? `${alias.origin}${audience.slice(url.origin.length)}` : alias.href);
    }
  }
  return [...accepted];
}

/**
 * The challenge of a refused request (RFC 6750 §3, RFC 9728 §5.1): where the metadata is, and, for a token that was
 * presented, why it was refused. Quotes and backslashes cannot reach it (descriptions are ours, never the token's).
 */
export function bearerChallenge(resource: string, refusal?: { error: 'invalid_token' | 'insufficient_scope'; description: string; scope?: string[] }): string {
  const quote = (text: string) => `"${text.replace(/["\\\r\n]/g, ' ')}"`;
  const parts = [`resource_metadata=${quote(metadataUrlFor(resource))}`];
  if (refusal) {
    parts.push(`error=${quote(refusal.error)}`, `error_description=${quote(refusal.description)}`);
    if (refusal.scope && refusal.scope.length > 0) parts.push(`scope=${quote(refusal.scope.join(' '))}`);
  }
  return `Bearer ${parts.join(', ')}`;
}
