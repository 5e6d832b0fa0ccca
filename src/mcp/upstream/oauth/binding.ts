/**
 * Binding an authorization flow to the browser that completes it. The `state` of a flow binds it to whoever started it
 * (a key, a signed-in user), not to the browser that finishes it: a forwarded link would give the starter the grant of
 * whoever approves it. So the link handed out is toolrouter's (`/oauth/connect/<flowId>`); the browser first shows the
 * connect page the credential that started the flow, and gets a cookie the callback requires (MCP 2026-07-28, URL mode
 * elicitation, security considerations: the server verifies that the user completing the elicitation is the user it
 * was made for, without trusting identity the client supplies; see docs/upstream-oauth.md).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Access } from '../../../auth/access.js';
import { OAUTH_CALLBACK_PATH } from './types.js';

/** Where the browser shows who it is before it is sent to the upstream's authorization server. */
export const OAUTH_CONNECT_PATH = '/oauth/connect';
const COOKIE_PREFIX = 'toolrouter_oauth_';
/** A flow id, state or binding: 32 random bytes, base64url. Anything else is not looked up. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Who started a flow, as far as binding it goes. */
export interface FlowStarter {
  /** Per-user flows: Access.subject. Undefined: the server's shared grant (the admin's). */
  subject?: string;
  /** The starting key's id, when a key started it. */
  keyId?: string;
}

export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

export function isToken(value: string): boolean {
  return TOKEN.test(value);
}

export function hashBinding(binding: string): string {
  return createHash('sha256').update(binding).digest('hex');
}

/** Compares a presented binding with the stored hash, in constant time. */
export function bindingMatches(presented: string | undefined, storedHash: string | undefined): boolean {
  if (presented === undefined || storedHash === undefined) return false;
  const a = Buffer.from(hashBinding(presented), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** One cookie per flow (two authorizations under way in one browser do not overwrite each other's). */
export function cookieName(state: string): string {
  return `${COOKIE_PREFIX}${createHash('sha256').update(state).digest('hex').slice(0, 16)}`;
}

/** A cookie's value from a Cookie header; undefined when absent or not a token. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header || header.length > 16_384) return undefined;
  for (const part of header.split(';')) {
    const cut = part.indexOf('=');
    if (cut > 0 && part.slice(0, cut).trim() === name) {
      const value = part.slice(cut + 1).trim();
      return isToken(value) ? value : undefined;
    }
  }
  return undefined;
}

/**
 * The binding cookie: HttpOnly (no script reads it), SameSite=Lax (sent on the authorization server's top-level
 * redirect back, not on cross-site subrequests), scoped to the callback's path and living as long as the flow.
 */
export function bindingCookie(state: string, binding: string, callbackUrl: string, maxAgeMs: number): string {
  const url = new URL(callbackUrl);
  const path = url.pathname || OAUTH_CALLBACK_PATH;
  const secure = url.protocol === 'https:' ? '; Secure' : '';
  return `${cookieName(state)}=${binding}; Path=${path}; Max-Age=${Math.max(1, Math.ceil(maxAgeMs / 1000))}; HttpOnly; SameSite=Lax${secure}`;
}

/** The connect link of a flow: beside the callback (`…/oauth/callback` → `…/oauth/connect/<flowId>`). */
export function connectUrl(callbackUrl: string, flowId: string): string {
  const url = new URL(callbackUrl);
  const base = url.pathname.endsWith(OAUTH_CALLBACK_PATH) ? url.pathname.slice(0, -OAUTH_CALLBACK_PATH.length) : '';
  return `${url.origin}${base}${OAUTH_CONNECT_PATH}/${flowId}`;
}

/**
 * Whether a credential presented at the connect page is the flow's starter. The shared grant: the admin key. A key's
 * own grant (`key:<id>`): that key. A user's grant (`user:<sub>`): that user signed in, or the `assert_user` key that
 * started the flow for them (its holder speaks for its users). A forwarded link plus any other credential is refused.
 */
export function isStarter(access: Access, starter: FlowStarter): boolean {
  if (starter.subject === undefined) return access.kind === 'admin';
  if (access.subject === starter.subject && access.key?.assertUser !== true) return true;
  return starter.keyId !== undefined && access.key?.keyId === starter.keyId && (access.subject === starter.subject || access.key.assertUser === true);
}
