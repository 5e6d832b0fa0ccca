import { createHash } from 'node:crypto';
import type { JWTPayload } from 'jose';
import { Access } from '../access.js';
import type { KeyRecord } from '../keys.js';
import { UnauthorizedError } from '../unauthorized.js';
import type { KeyDefaults } from '../settings.js';
import type { IdentitySettings, KeyTemplate } from './settings.js';
import type { VerifiedToken } from './verifier.js';

/** Users remembered with their Access (derived name sets); beyond this the least recently seen is dropped. */
const MAX_CACHED_USERS = 10_000;
/** Claim values looked at per token: a token with thousands of groups is read only this far. */
const MAX_CLAIM_VALUES = 256;

export interface PrincipalOptions {
  /** auth.oauth.claims: a claim → key template table. */
  claims?: IdentitySettings['claims'];
  /** auth.oauth.defaultKey, else keys.defaults. */
  defaultKey: KeyTemplate | KeyDefaults;
  /** Claims policies read (policy.groupsClaim, policy.claims): carried on the user's Access, and part of its cache key. */
  policyClaims?: readonly string[];
}

/**
 * Turns a verified token into the Access every face asks: the user is treated as a key made from a template (the first
 * claim value with one, else the default), so what a signed-in user sees is decided by the same rules as for keys.
 * The subject becomes `user:<sub>`, whose grants upstreams with per-user OAuth use.
 */
export class Principals {
  private readonly cache = new Map<string, Access>();

  constructor(private readonly options: PrincipalOptions) {}

  accessFor(token: VerifiedToken): Access {
    // The verifier admits only string subjects; a caller handing anything else here is refused, never coerced.
    if (typeof token.subject !== 'string' || token.subject === '') throw new UnauthorizedError('invalid access token: the subject claim (sub) must be a non-empty string', 'invalid');
    const template = this.templateFor(token.claims);
    const claims = this.policyClaims(token.claims);
    const cacheKey = `${template.name}\u0000${token.subject}\u0000${JSON.stringify(claims)}`;
    let access = this.cache.get(cacheKey);
    if (access) {
      // Most recently seen last, so the oldest is dropped first.
      this.cache.delete(cacheKey);
    } else {
      access = Access.forUser(recordFor(token.subject, template.name, template.settings), token.subject, claims);
      if (this.cache.size >= MAX_CACHED_USERS) this.cache.delete(this.cache.keys().next().value!);
    }
    this.cache.set(cacheKey, access);
    return access;
  }

  /** The claims policies read, each a string or a list of at most MAX_CLAIM_VALUES strings (anything else left out). */
  private policyClaims(claims: JWTPayload): Record<string, string | string[]> {
    const picked: Record<string, string | string[]> = {};
    for (const name of this.options.policyClaims ?? []) {
      const value = claims[name];
      if (typeof value === 'string') picked[name] = value;
      else if (Array.isArray(value)) picked[name] = value.slice(0, MAX_CLAIM_VALUES).filter((item): item is string => typeof item === 'string');
    }
    return picked;
  }

  private templateFor(claims: JWTPayload): { name: string; settings: KeyTemplate | KeyDefaults } {
    const rule = this.options.claims;
    if (rule) {
      const value = claims[rule.claim];
      const values = (Array.isArray(value) ? value : [value]).slice(0, MAX_CLAIM_VALUES);
      for (const candidate of values) {
        if (typeof candidate === 'string' && Object.hasOwn(rule.keys, candidate)) return { name: `claim:${candidate}`, settings: rule.keys[candidate]! };
      }
    }
    return { name: 'default', settings: this.options.defaultKey };
  }
}

/**
 * A key record that exists only in memory: never stored, never a credential (no secret hash matches it). Its id names
 * the user (hashed, so logs and metrics labels carry no identifier of the issuer's choosing).
 */
function recordFor(subject: string, template: string, settings: KeyTemplate | KeyDefaults): KeyRecord {
  return {
    keyId: `user_${createHash('sha256').update(subject).digest('hex').slice(0, 16)}`,
    secretHash: '',
    alias: `oauth user (${template})`,
    ...(settings.allowed_servers ? { allowedServers: [...settings.allowed_servers] } : {}),
    ...(settings.allowed_tools ? { allowedTools: [...settings.allowed_tools] } : {}),
    toolSearchEnabled: settings.tool_search_enabled,
    ...(settings.rpm_limit !== undefined ? { rpmLimit: settings.rpm_limit } : {}),
    createdAt: Date.now(),
  };
}
