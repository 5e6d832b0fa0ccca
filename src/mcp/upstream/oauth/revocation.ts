/**
 * RFC 7009 token revocation at an upstream's authorization server, for a grant toolrouter has already dropped: best
 * effort, within one deadline, never logging a token. The grant is gone from the store before this runs, so a failure
 * here only means the authorization server may keep honouring the tokens until they expire.
 */
import {
  assertSecureTokenEndpoint,
  discoverOAuthServerInfo,
  selectClientAuthMethod,
  type OAuthServerInfo,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
} from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import type { OAuthRecord } from './store.js';

/**
 * What happened upstream: `revoked` (every token accepted by the revocation endpoint), `unsupported` (the authorization
 * server advertises no `revocation_endpoint`), `failed` (not reached in time, refused, or not the server that issued
 * the tokens), `none` (there were no tokens to revoke).
 */
export type RevocationOutcome = 'revoked' | 'unsupported' | 'failed' | 'none';

export interface RevocationRequest {
  /** The MCP server's URL (discovery starts there when the record holds no trusted discovery). */
  url: string;
  /** The record as it was before its tokens were dropped. */
  record: OAuthRecord;
  /** The client the tokens were issued to (configured, the record's, or the server's shared one). */
  client: StoredOAuthClientInformation | undefined;
  timeoutMs: number;
  log: Logger;
}

export async function revokeAtAuthorizationServer(request: RevocationRequest): Promise<RevocationOutcome> {
  const { record, client, log } = request;
  const tokens = record.tokens;
  if (!tokens?.access_token && !tokens?.refresh_token) return 'none';
  const signal = AbortSignal.timeout(request.timeoutMs);
  const fetchFn: typeof fetch = (input, init) => fetch(input, { ...init, signal, redirect: 'error' });
  try {
    const info = await serverInfo(request.url, record, fetchFn);
    const metadata = info.authorizationServerMetadata;
    // RFC 8414 names it; OpenID provider metadata (also accepted by discovery) carries it as an extra field.
    const revocation = metadata as { revocation_endpoint?: unknown; revocation_endpoint_auth_methods_supported?: unknown } | undefined;
    const endpoint = typeof revocation?.revocation_endpoint === 'string' ? revocation.revocation_endpoint : undefined;
    if (!metadata || !endpoint) {
      log.info({ outcome: 'unsupported' }, 'the upstream authorization server advertises no revocation endpoint; its tokens live until they expire');
      return 'unsupported';
    }
    if (!client) throw new Error('no client to authenticate the revocation with');
    // Tokens go only to the authorization server that issued them: its issuer stamp, or (unstamped) one named by the
    // protected resource metadata, never a guess from the MCP server's origin.
    const issuer = tokens.issuer ?? client.issuer;
    if (issuer !== undefined ? issuer !== metadata.issuer : !info.resourceMetadata) throw new Error('the authorization server found is not confirmed as the one that issued the tokens');
    assertSecureTokenEndpoint(endpoint);
    const methods = Array.isArray(revocation?.revocation_endpoint_auth_methods_supported) ? (revocation.revocation_endpoint_auth_methods_supported as string[]) : undefined;
    const method = selectClientAuthMethod(client, methods ?? metadata.token_endpoint_auth_methods_supported ?? []);
    // The refresh token first: revoking it ends the grant (and, where the server ties them, its access tokens).
    const sent = tokenList(tokens);
    const statuses: number[] = [];
    for (const [token, hint] of sent) statuses.push(await revokeOne(endpoint, token, hint, client, method, fetchFn));
    const refused = statuses.filter((status) => status !== 200);
    if (refused.length > 0) {
      log.warn({ outcome: 'failed', statuses }, 'the upstream authorization server refused the token revocation');
      return 'failed';
    }
    log.info({ outcome: 'revoked', tokens: sent.map(([, hint]) => hint) }, 'tokens revoked at the upstream authorization server');
    return 'revoked';
  } catch (error) {
    const reason = signal.aborted ? `no answer within ${request.timeoutMs} ms` : error instanceof Error ? error.message.slice(0, 300) : String(error).slice(0, 300);
    log.warn({ outcome: 'failed', reason }, 'token revocation at the upstream authorization server failed; its tokens live until they expire');
    return 'failed';
  }
}

/** The record's discovery when it is a fact (protected resource metadata found it), else discovered again. */
async function serverInfo(url: string, record: OAuthRecord, fetchFn: typeof fetch): Promise<OAuthServerInfo> {
  const stored = record.discovery;
  if (stored?.resourceMetadata && stored.authorizationServerMetadata) return stored;
  return discoverOAuthServerInfo(url, { fetchFn });
}

function tokenList(tokens: StoredOAuthTokens): [string, 'refresh_token' | 'access_token'][] {
  return [
    ...(tokens.refresh_token ? [[tokens.refresh_token, 'refresh_token'] as [string, 'refresh_token']] : []),
    ...(tokens.access_token ? [[tokens.access_token, 'access_token'] as [string, 'access_token']] : []),
  ];
}

async function revokeOne(
  endpoint: string,
  token: string,
  hint: 'refresh_token' | 'access_token',
  client: StoredOAuthClientInformation,
  method: string,
  fetchFn: typeof fetch,
): Promise<number> {
  const headers = new Headers({ 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' });
  const body = new URLSearchParams({ token, token_type_hint: hint });
  // Client authentication as the SDK does it at the token endpoint (RFC 6749 §2.3.1; RFC 7009 §2.1 asks for the same).
  if (method === 'client_secret_basic') {
    if (!client.client_secret) throw new Error('client_secret_basic needs a client secret');
    headers.set('authorization', `Basic ${btoa(`${client.client_id}:${client.client_secret}`)}`);
  } else if (method === 'client_secret_post') {
    body.set('client_id', client.client_id);
    if (client.client_secret) body.set('client_secret', client.client_secret);
  } else if (method === 'none') {
    body.set('client_id', client.client_id);
  } else {
    throw new Error(`client authentication ${method} is not supported for revocation`);
  }
  const response = await fetchFn(endpoint, { method: 'POST', headers, body });
  // The body is not read into any message: an error body could echo the token.
  await response.body?.cancel().catch(() => {});
  return response.status;
}
