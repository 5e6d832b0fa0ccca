import express, { Router, type Request, type Response } from 'express';
import type { Auth } from '../../../auth/auth.js';
import { UnauthorizedError } from '../../../auth/unauthorized.js';
import { ToolrouterError } from '../../../errors.js';
import { accessOf, assertAdmin } from '../../../http/auth.js';
import { HttpError } from '../../../http/errors.js';
import { OAUTH_CONNECT_PATH } from './binding.js';
import type { OAuthManager } from './manager.js';
import { OAuthRequestError } from './server-oauth.js';

import { OAUTH_CALLBACK_PATH } from './types.js';

export { OAUTH_CALLBACK_PATH, OAUTH_CONNECT_PATH };

/** What the connect page needs of toolrouter's authentication: whether the service is open, and a key check. */
export type ConnectAuth = Pick<Auth, 'open' | 'authenticate'>;

/** The connect form's body: one key or token, bounded before it is parsed. */
const CONNECT_BODY_LIMIT = '16kb';
const MAX_CREDENTIAL_CHARS = 8_192;

/** This service's client ID metadata document (when mcp.oauth.clientMetadataUrl is set); public like the callback. */
export const OAUTH_CLIENT_METADATA_PATH = '/oauth/client-metadata.json';

/**
 * Connecting an OAuth upstream: `POST /v1/mcp/servers/:name/authorize` → `{authorization_url}`, toolrouter's connect
 * link (`/oauth/connect/<flowId>`) to open in a browser. The connect page asks that browser for the credential that
 * started the flow (an open service skips it), sets the flow's binding cookie and sends it on to the authorization
 * server, which sends it back to `GET /oauth/callback`; the callback needs the cookie, stores the grant and (through
 * `onAuthorized`) connects the server. No answer ever carries a token. Why: src/mcp/upstream/oauth/binding.ts.
 */
export function oauthRoutes(
  oauth: OAuthManager,
  auth: ConnectAuth,
  onAuthorized: (server: string) => void,
  onRevoked: (server: string, subject: string) => void = () => {},
): Router {
  const router = Router();

  router.post('/v1/mcp/servers/:name/authorize', async (req, res) => {
    const server = req.params.name as string;
    const access = accessOf(res);
    // Anyone with a subject may connect their own account to a per-user server they may use; the shared grant is the admin's.
    const own = !access.isAdmin && access.subject !== undefined && access.canSeeServer(server) && oauth.perUser(server);
    if (!own) assertAdmin(res);
    const keyId = access.key?.keyId;
    const authorizationUrl = await answer(() => (own ? oauth.authorizeUser(server, access.subject!, callbackFor(req), keyId) : oauth.authorize(server, callbackFor(req), keyId)));
    res.setHeader('Cache-Control', 'no-store');
    res.json({ authorization_url: authorizationUrl });
  });

  // Per-user grants: the admin lists and revokes anyone's; a subject revokes its own.
  router.get('/v1/mcp/servers/:name/grants', async (req, res) => {
    assertAdmin(res);
    const grants = await answer(() => oauth.userGrants(req.params.name as string));
    res.setHeader('Cache-Control', 'no-store');
    res.json({ grants: grants.map(({ subject, updatedAt, problem }) => ({ subject, updated_at: updatedAt, ...(problem ? { problem } : {}) })) });
  });

  router.delete('/v1/mcp/servers/:name/grants/:subject', async (req, res) => {
    assertAdmin(res);
    const server = req.params.name as string;
    const subject = req.params.subject as string;
    const { revoked, upstream } = await answer(() => oauth.revokeUser(server, subject, 'the admin'));
    onRevoked(server, subject);
    res.json({ revoked, upstream_revocation: upstream });
  });

  router.delete('/v1/mcp/servers/:name/grant', async (req, res) => {
    const server = req.params.name as string;
    const access = accessOf(res);
    if (access.subject === undefined) throw new HttpError(400, 'invalid_request', 'this caller has no per-user grants (the admin uses the shared grant)');
    if (!access.canSeeServer(server) || !oauth.perUser(server)) throw new HttpError(404, 'not_found', `no per-user OAuth server "${server}" for this caller`);
    const { revoked, upstream } = await answer(() => oauth.revokeUser(server, access.subject!, 'its owner'));
    onRevoked(server, access.subject);
    res.json({ revoked, upstream_revocation: upstream });
  });

  router.get(OAUTH_CLIENT_METADATA_PATH, (_req, res) => {
    const document = oauth.clientMetadataDocument();
    if (!document) throw new HttpError(404, 'not_found', 'no client metadata document: mcp.oauth.clientMetadataUrl is not set');
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.json(document);
  });

  router.get(OAUTH_CALLBACK_PATH, async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    // The page is ours: nothing from the query is echoed but through textContent-safe escaping.
    res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    const query = Object.fromEntries(
      ['state', 'code', 'error', 'error_description', 'iss'].flatMap((name) => (typeof req.query[name] === 'string' ? [[name, (req.query[name] as string).slice(0, 4_096)]] : [])),
    );
    try {
      const { server, subject, upstreamUrl, account } = await oauth.callback(query, req.headers.cookie);
      // The page names what was linked to what, so a person who did not mean this link sees it (and can revoke it).
      const upstream = `the MCP server "${server}" (${hostOf(upstreamUrl)})${account !== undefined ? `, account "${account}" there,` : ''}`;
      if (subject === undefined) {
        onAuthorized(server);
        res.type('html').send(page('Connected', `toolrouter is now authorized for ${upstream} as its shared grant (used by every caller without their own) and is connecting to it. You can close this tab.`));
      } else {
        res.type('html').send(page('Connected', `Your calls to ${upstream} now act as your account there; linked to toolrouter subject "${subject}". You can close this tab and call again.`));
      }
    } catch (error) {
      const status = error instanceof OAuthRequestError ? error.status : 502;
      const message = error instanceof Error ? error.message : String(error);
      res.status(status).type('html').send(page('Not connected', message));
    }
  });

  // The connect page: GET shows it (an open service goes straight on), POST checks the credential (a form field, never
  // the URL: a URL is logged, kept in history and forwarded).
  router.get(`${OAUTH_CONNECT_PATH}/:flowId`, async (req, res) => {
    pageHeaders(res);
    const flowId = req.params.flowId as string;
    try {
      if (auth.open) return pass(res, await oauth.connect(flowId, undefined));
      const link = await oauth.connectLink(flowId);
      if (!link) throw new OAuthRequestError('not_found', 'unknown, used or expired authorization link: start again (POST /v1/mcp/servers/:name/authorize, or call the tool again)');
      res.type('html').send(connectForm(link.server, link.subject !== undefined));
    } catch (error) {
      refuse(res, error);
    }
  });

  router.post(`${OAUTH_CONNECT_PATH}/:flowId`, express.urlencoded({ extended: false, limit: CONNECT_BODY_LIMIT, parameterLimit: 4 }), async (req, res) => {
    pageHeaders(res);
    const flowId = req.params.flowId as string;
    try {
      // A form posted from another site (Origin names it) is not this page's: refusing it keeps a page elsewhere from
      // making this browser pass with the attacker's key (and so link the victim's upstream account to the attacker).
      // Host against Host, as the loopback Origin check does (src/http/host-check.ts): behind a TLS-terminating proxy the
      // scheme seen here is not the browser's.
      const origin = req.get('origin');
      if (origin !== undefined && hostOf(origin) !== req.get('host')) throw new OAuthRequestError('forbidden', 'this form was posted from another site');
      if (auth.open) return pass(res, await oauth.connect(flowId, undefined));
      const secret = typeof req.body?.key === 'string' ? (req.body.key as string).trim() : '';
      if (secret === '' || secret.length > MAX_CREDENTIAL_CHARS) throw new UnauthorizedError('enter the API key (or access token) you called toolrouter with', 'missing');
      // The same check as any request (rate limits and the failed-key lockout included): nothing here is easier to guess.
      const access = await auth.authenticate({ secret, header: 'x-toolrouter-key' }, req.ip ?? req.socket.remoteAddress ?? 'unknown');
      pass(res, await oauth.connect(flowId, access));
    } catch (error) {
      refuse(res, error);
    }
  });

  /** Past the connect page: the binding cookie, then the authorization server. 303: the browser GETs it. */
  function pass(res: Response, passed: { cookie: string; authorizationUrl: string }): void {
    res.setHeader('Set-Cookie', passed.cookie);
    res.redirect(303, passed.authorizationUrl);
  }

  /** A refusal as a page (a wrong key leaves the link unused: the browser can go back and try again). */
  function refuse(res: Response, error: unknown): void {
    const status = error instanceof ToolrouterError ? error.status : 502;
    res.status(status).type('html').send(page('Not connected', error instanceof Error ? error.message : String(error)));
  }

  return router;
}

/**
 * Every page here: never cached, nothing but inline style, no framing. No `form-action`: browsers apply it to the
 * redirect after the form too, which goes to the authorization server.
 */
function pageHeaders(res: Response): void {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'");
  // same-origin, not no-referrer: under no-referrer browsers post the form with `Origin: null`, which the Origin checks
  // (here and src/http/host-check.ts) refuse; the authorization server still gets no Referer naming the flow's link.
  res.setHeader('Referrer-Policy', 'same-origin');
}

/** A URL's host (and port); `null` and other non-URLs are their own text, which matches no Host. */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** The connect form: posts to its own address (so the flow id comes from the path it was opened at). */
function connectForm(server: string, perUser: boolean): string {
  const who = perUser
    ? 'Enter the API key (or access token) you called toolrouter with when it asked you to authorize. Only the key or user that started this authorization can complete it.'
    : 'Enter the admin key. Only the admin, who started this authorization, can complete it.';
  return page(
    `Connect "${server}"`,
    `toolrouter will send this browser on to the authorization server of the MCP server "${server}". ${who} If someone sent you this link, do not continue.`,
    '<form method="post"><label>Key or token <input type="password" name="key" autocomplete="off" required style="width:100%"></label><p><button type="submit">Continue</button></p></form>',
  );
}

/** `mcp.oauth.callbackUrl` unset: the callback at the address the admin used (the browser is expected to reach it too). */
function callbackFor(req: Request): string {
  return `${req.protocol}://${req.get('host') ?? 'localhost'}${OAUTH_CALLBACK_PATH}`;
}

async function answer<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof OAuthRequestError) throw error;
    throw new HttpError(502, 'upstream_error', `authorization could not start: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** `html`: markup of ours only (the form); every text is escaped. */
function page(title: string, message: string, html = ''): string {
  const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html><meta charset="utf-8"><title>${escape(title)} · toolrouter</title><body style="font-family:system-ui;margin:3rem auto;max-width:40rem"><h1>${escape(title)}</h1><p>${escape(message)}</p>${html}</body>`;
}
