import { createLocalJWKSet, createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { ToolrouterError } from '../../errors.js';
import { UnauthorizedError } from '../unauthorized.js';
import type { IdentitySettings } from './settings.js';

/** A token that passed every check: signature, issuer, audience, time, required scopes. */
export interface VerifiedToken {
  /** The token's `sub`: who the user is at the issuer. */
  subject: string;
  scopes: string[];
  claims: JWTPayload;
}

export type TokenVerifierOptions = Pick<
  IdentitySettings,
  'issuer' | 'audience' | 'jwksUri' | 'requiredScopes' | 'algorithms' | 'clockToleranceSeconds' | 'jwksCooldownMs' | 'jwksMaxAgeMs'
> & {
  /**
   * How long past `jwksMaxAgeMs` the cached signing keys keep verifying while the JWKS cannot be fetched (down, slow,
   * erroring); 0 turns stale-if-error off. See `IdentitySettings.jwksMaxStaleMs`.
   * @defaultValue 86400000 (one day)
   */
  jwksMaxStaleMs?: number;
  /** Where the one warning of a JWKS outage (and the one note of its end) goes; without it, nowhere. */
  log?: { warn(object: object, message: string): void; info(object: object, message: string): void };
};

/** How long cached keys stay usable past their age while the JWKS cannot be fetched, unless configured. */
export const DEFAULT_JWKS_MAX_STALE_MS = 86_400_000;

/** The issuer did not say where its keys are, or could not be reached to say: the token cannot be checked now. */
const DISCOVERY_TIMEOUT_MS = 5_000;
/** Metadata documents are small; a larger answer is not one. */
const MAX_METADATA_BYTES = 256 * 1024;
/** A token longer than this is refused before any parsing (headers of 8 KB+ are refused by most proxies anyway). */
export const MAX_TOKEN_CHARS = 16_384;
/** A subject is an identifier, not a document. */
const MAX_SUBJECT_CHARS = 255;

/** A compact JWS: three base64url parts. What an API key or another provider's opaque token never looks like. */
export function looksLikeJwt(credential: string): boolean {
  return credential.length <= MAX_TOKEN_CHARS && /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(credential);
}

/**
 * Checks JWT access tokens of one issuer with `jose`: the signing keys come from the JWKS (configured, or found in the
 * issuer's metadata), are cached and fetched again when a token names an unknown key (rotation), at most once per
 * cooldown. A failed discovery is not remembered: the next token tries again.
 */
export class TokenVerifier {
  private keys: JWTVerifyGetKey | undefined;
  private discovering: Promise<JWTVerifyGetKey> | undefined;
  private remote: RemoteKeys | undefined;
  /** When the remote key set was last seen fresh (fetched within jwksMaxAgeMs): stale use is measured from here. */
  private freshSeenAt = 0;
  /** A background refetch under way (one at a time). */
  private refetching: Promise<void> | undefined;
  /** Set while the JWKS is failing: the outage is logged once, and its end once. */
  private outage = false;

  constructor(private readonly options: TokenVerifierOptions) {}

  async verify(token: string): Promise<VerifiedToken> {
    if (!looksLikeJwt(token)) throw new UnauthorizedError('invalid access token: not a JWT', 'invalid');
    const keys = await this.signingKeys();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: this.options.issuer,
        audience: this.options.audience,
        algorithms: [...this.options.algorithms],
        clockTolerance: this.options.clockToleranceSeconds,
        requiredClaims: ['sub', 'exp'],
      }));
    } catch (error) {
      throw refusal(error);
    }
    const subject = subjectOf(payload);
    const scopes = scopesOf(payload);
    const missing = this.options.requiredScopes.filter((scope) => !scopes.includes(scope));
    if (missing.length > 0) {
      throw new ToolrouterError('forbidden', `the access token lacks the scope${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`, { reason: 'insufficient_scope' });
    }
    return { subject, scopes, claims: payload };
  }

  private async signingKeys(): Promise<JWTVerifyGetKey> {
    if (this.keys) return this.keys;
    // One discovery at a time; a failed one is forgotten so the next request tries again.
    this.discovering ??= this.discover().finally(() => (this.discovering = undefined));
    this.keys = await this.discovering;
    return this.keys;
  }

  private async discover(): Promise<JWTVerifyGetKey> {
    const jwksUri = this.options.jwksUri ?? (await jwksUriOf(this.options.issuer));
    const remote = createRemoteJWKSet(new URL(jwksUri), {
      cooldownDuration: this.options.jwksCooldownMs,
      cacheMaxAge: this.options.jwksMaxAgeMs,
      timeoutDuration: DISCOVERY_TIMEOUT_MS,
    });
    this.remote = remote;
    return (header, token) => this.keyFor(remote, header, token);
  }

  /**
   * The key for one token. Fresh keys (or none yet): jose's remote set, as before (an unknown kid refetches, cooldown
   * permitting). Keys past jwksMaxAgeMs: verified with the keys held, at once, while one refetch runs in the background
   * (stale-while-revalidate), for at most jwksMaxStaleMs past their age: so an IdP whose JWKS is down or slow does not
   * lock out users whose tokens the held keys still verify. A kid the held keys do not know still goes to the remote
   * set (a rotation needs the new keys; if they cannot be fetched that token cannot be checked).
   */
  private async keyFor(remote: RemoteKeys, header: Parameters<JWTVerifyGetKey>[0], token: Parameters<JWTVerifyGetKey>[1]): Promise<Awaited<ReturnType<JWTVerifyGetKey>>> {
    const now = Date.now();
    if (remote.fresh) this.freshSeenAt = now;
    const held = remote.jwks();
    const maxStale = this.options.jwksMaxStaleMs ?? DEFAULT_JWKS_MAX_STALE_MS;
    if (remote.fresh || held === undefined || maxStale === 0 || now - this.freshSeenAt > maxStale) {
      const key = await remote(header, token);
      if (remote.fresh) this.freshSeenAt = Date.now();
      return key;
    }
    this.refetch(remote);
    try {
      return await createLocalJWKSet(held)(header, token);
    } catch (error) {
      if (error instanceof joseErrors.JWKSNoMatchingKey) return remote(header, token);
      throw error;
    }
  }

  /** One background refetch of stale keys; its failure is logged once per outage (the held keys carry on). */
  private refetch(remote: RemoteKeys): void {
    this.refetching ??= remote
      .reload()
      .then(
        () => {
          this.freshSeenAt = Date.now();
          if (this.outage) this.options.log?.info({ jwks: this.options.jwksUri ?? this.options.issuer }, 'the token issuer\'s JWKS can be fetched again');
          this.outage = false;
        },
        (error: unknown) => {
          if (!this.outage) {
            const stale = this.options.jwksMaxStaleMs ?? DEFAULT_JWKS_MAX_STALE_MS;
            this.options.log?.warn(
              { jwks: this.options.jwksUri ?? this.options.issuer, err: error instanceof Error ? error.message : String(error), jwksMaxStaleMs: stale },
              'the token issuer\'s JWKS cannot be fetched: tokens are verified with the cached signing keys (for at most jwksMaxStaleMs past their age) while it is retried',
            );
          }
          this.outage = true;
        },
      )
      .finally(() => (this.refetching = undefined));
  }
}

/** jose's remote key set, with what stale-if-error reads of it. */
type RemoteKeys = ReturnType<typeof createRemoteJWKSet>;

/**
 * The token's subject: only a non-empty string of at most MAX_SUBJECT_CHARS without control characters is one. A
 * number, a boolean, an object or a list (`["alice"]`) is not a name for anyone, and is refused, never coerced.
 */
function subjectOf(payload: JWTPayload): string {
  const subject: unknown = payload.sub;
  if (typeof subject !== 'string' || subject.length === 0 || subject.length > MAX_SUBJECT_CHARS || [...subject].some((char) => char.charCodeAt(0) < 0x20 || char.charCodeAt(0) === 0x7f)) {
    throw new UnauthorizedError(`invalid access token: the subject claim (sub) must be a non-empty string of at most ${MAX_SUBJECT_CHARS} characters`, 'invalid');
  }
  return subject;
}

/** `scope` (RFC 9068: space-separated) or `scp` (a list, as some IdPs send it). */
function scopesOf(payload: JWTPayload): string[] {
  if (typeof payload.scope === 'string') return payload.scope.split(' ').filter((scope) => scope !== '');
  const scp = (payload as { scp?: unknown }).scp;
  if (Array.isArray(scp)) return scp.filter((scope): scope is string => typeof scope === 'string');
  if (typeof scp === 'string') return scp.split(' ').filter((scope) => scope !== '');
  return [];
}

/** Why a token was refused, in words that name no part of it. Key-fetch failures are the IdP's, not the caller's. */
function refusal(error: unknown): ToolrouterError {
  if (error instanceof joseErrors.JWTExpired) return new UnauthorizedError('access token expired', 'invalid');
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    const claim = error.claim === 'aud' ? 'audience (aud): the token was not issued for this service' : error.claim === 'iss' ? 'issuer (iss)' : `claim ${error.claim}`;
    return new UnauthorizedError(`invalid access token: wrong ${claim}`, 'invalid');
  }
  if (error instanceof joseErrors.JWKSTimeout || (error instanceof joseErrors.JOSEError && error.code === 'ERR_JOSE_GENERIC')) {
    return new ToolrouterError('auth_unavailable', 'the signing keys of the token issuer cannot be fetched right now', { retryAfterSeconds: 5, cause: error });
  }
  if (error instanceof joseErrors.JWKSNoMatchingKey) return new UnauthorizedError('invalid access token: signed with a key the issuer does not publish', 'invalid');
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return new UnauthorizedError('invalid access token: signature algorithm not accepted', 'invalid');
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return new UnauthorizedError('invalid access token: bad signature', 'invalid');
  if (error instanceof TypeError || (error as { code?: string }).code === 'ECONNREFUSED') {
    return new ToolrouterError('auth_unavailable', 'the signing keys of the token issuer cannot be fetched right now', { retryAfterSeconds: 5, cause: error });
  }
  return new UnauthorizedError('invalid access token', 'invalid');
}

/**
 * The issuer's `jwks_uri`: RFC 8414 metadata (path inserted after the host), then OpenID discovery (path appended).
 * The document must name the configured issuer, or its keys are not that issuer's.
 */
async function jwksUriOf(issuer: string): Promise<string> {
  const url = new URL(issuer);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  const candidates = [`${url.origin}/.well-known/oauth-authorization-server${path}`, `${url.origin}${path}/.well-known/openid-configuration`];
  const problems: string[] = [];
  for (const candidate of candidates) {
    try {
      const response = await fetch(candidate, { signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS), headers: { accept: 'application/json' } });
      if (!response.ok) {
        problems.push(`${candidate}: HTTP ${response.status}`);
        continue;
      }
      const text = await response.text();
      if (text.length > MAX_METADATA_BYTES) throw new Error('metadata document too large');
      const metadata = JSON.parse(text) as { issuer?: unknown; jwks_uri?: unknown };
      if (!sameIssuer(metadata.issuer, issuer)) throw new Error(`metadata names another issuer (${String(metadata.issuer).slice(0, 200)})`);
      if (typeof metadata.jwks_uri !== 'string') throw new Error('metadata has no jwks_uri');
      return metadata.jwks_uri;
    } catch (error) {
      problems.push(`${candidate}: ${(error as Error).message}`);
    }
  }
  throw new ToolrouterError('auth_unavailable', `the token issuer's signing keys cannot be found (${problems.join('; ')}); set auth.oauth.jwksUri`, { retryAfterSeconds: 5 });
}

function sameIssuer(found: unknown, configured: string): boolean {
  return typeof found === 'string' && found.replace(/\/$/, '') === configured.replace(/\/$/, '');
}
