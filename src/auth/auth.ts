import { Access } from './access.js';
import type { KeyStore } from './key-store.js';
import { hashSecret, sameSecret, SECRET_PREFIX } from './keys.js';
import { RateLimitedError, type RateLimits } from './rate-limit.js';
import type { Identity } from './identity/identity.js';
import { UnauthorizedError } from './unauthorized.js';

export interface AuthSettings {
  /** Unset: the service is open (and listens on loopback only); presented virtual keys still narrow what a caller sees. */
  adminKey?: string;
  /** Requests per minute per client address, whoever they are; 0: no limit. */
  perIpPerMinute: number;
  /** Failed key checks per minute per client address before the address is refused for the rest of the minute. */
  authFailuresPerIpPerMinute: number;
}

export { UnauthorizedError } from './unauthorized.js';

/** A credential as presented: where it came from matters, because an Authorization header may be meant for the LLM. */
export interface Credential {
  secret: string;
  header: 'x-toolrouter-key' | 'authorization';
}

/**
 * `x-toolrouter-key: <key>`, or `Authorization: Bearer <key>` when that bearer token is toolrouter's (a virtual key or
 * the admin key). Any other bearer token belongs to the caller's LLM provider and is left for the chat proxy to forward
 * unless `anyBearer` (routes that forward nothing to an LLM): there it is a wrong key, and is reported as one.
 */
export function readCredential(
  headers: { authorization?: string; 'x-toolrouter-key'?: string | string[] },
  adminKey: string | undefined,
  anyBearer = false,
): Credential | undefined {
  const explicit = headers['x-toolrouter-key'];
  if (typeof explicit === 'string' && explicit.trim() !== '') return { secret: explicit.trim(), header: 'x-toolrouter-key' };
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '')?.[1];
  if (bearer === undefined) return undefined;
  if (anyBearer || bearer.startsWith(SECRET_PREFIX) || (adminKey !== undefined && sameSecret(bearer, adminKey))) {
    return { secret: bearer, header: 'authorization' };
  }
  return undefined;
}

/**
 * Decides who a request comes from. The admin key is compared in constant time; virtual keys are looked up by the hash
 * of their secret (nothing reversible is stored). Rate limits apply here too, so every face is covered by one check.
 */
export class Auth {
  constructor(
    readonly settings: AuthSettings,
    readonly store: KeyStore,
    private readonly limits: RateLimits,
    /** auth.oauth: JWT access tokens of an authorization server accepted beside keys. */
    readonly identity?: Identity,
  ) {}

  /** Open service: anyone may manage keys; keys only narrow what their holder sees. */
  get open(): boolean {
    return this.settings.adminKey === undefined;
  }

  /** `anonymous`: a request without a credential is let in (the chat proxy with chat.requireKey off). */
  async authenticate(credential: Credential | undefined, clientAddress: string, anonymous = false): Promise<Access> {
    if (this.settings.perIpPerMinute > 0) await this.limits.consume('ip', clientAddress, this.settings.perIpPerMinute);
    // The admin key is checked before the failed-login lockout and any key lookup: other callers' bad keys from the same
    // address and a Redis outage cannot lock it out.
    if (credential !== undefined && this.isAdminKey(credential.secret)) return Access.admin;
    if (credential === undefined) {
      if (this.open) return Access.open;
      if (anonymous) return Access.anonymous;
      throw new UnauthorizedError('missing API key: send "Authorization: Bearer <key>" or "x-toolrouter-key: <key>"', 'missing');
    }
    const failures = this.settings.authFailuresPerIpPerMinute;
    if (failures > 0) await this.limits.check('auth-failure', clientAddress, failures);
    try {
      const access = await this.verify(credential.secret);
      await this.countRequest(access);
      return access;
    } catch (error) {
      if (error instanceof UnauthorizedError && failures > 0) {
        await this.limits.consume('auth-failure', clientAddress, failures).catch((limited: unknown) => {
          if (!(limited instanceof RateLimitedError)) throw limited;
        });
      }
      throw error;
    }
  }

  /**
   * Counts one request against the caller's key limit (`rpm_limit`); throws RateLimitedError past it. Authentication
   * counts the HTTP request; code mode counts each call its code makes, as the direct call would have been counted.
   */
  async countRequest(access: Access): Promise<void> {
    if (access.key?.rpmLimit !== undefined) await this.limits.consume('key', access.key.keyId, access.key.rpmLimit);
  }

  private isAdminKey(secret: string): boolean {
    return this.settings.adminKey !== undefined && sameSecret(secret, this.settings.adminKey);
  }

  private async verify(secret: string): Promise<Access> {
    // An access token is told apart by its form: API keys carry SECRET_PREFIX and are never three base64url parts.
    if (this.identity && !secret.startsWith(SECRET_PREFIX) && this.identity.accepts(secret)) return this.identity.authenticate(secret);
    const record = await this.store.bySecretHash(hashSecret(secret));
    if (!record) throw new UnauthorizedError('invalid API key', 'invalid');
    if (record.expiresAt !== undefined && record.expiresAt <= Date.now()) {
      throw new UnauthorizedError(`API key ${record.keyId} expired at ${new Date(record.expiresAt).toISOString()}`, 'invalid');
    }
    return Access.forKey(record);
  }
}
