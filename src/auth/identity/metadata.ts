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

export function protectedResourceMetadata(settings: Pick<IdentitySettings, 'issuer' | 'requiredScopes'>, resource: string): Record<string, unknown> {
  return {
    resource,
    authorization_servers: [settings.issuer],
    bearer_methods_supported: ['header'],
    ...(settings.requiredScopes.length > 0 ? { scopes_supported: settings.requiredScopes } : {}),
    resource_name: 'toolrouter',
  };
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
