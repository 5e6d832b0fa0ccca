import { Router, type Request } from 'express';
import { accessOf, assertAdmin } from '../../../http/auth.js';
import { HttpError } from '../../../http/errors.js';
import type { OAuthManager } from './manager.js';
import { OAuthRequestError } from './server-oauth.js';

import { OAUTH_CALLBACK_PATH } from './types.js';

export { OAUTH_CALLBACK_PATH };
/** This service's client ID metadata document (when mcp.oauth.clientMetadataUrl is set); public like the callback. */
export const OAUTH_CLIENT_METADATA_PATH = '/oauth/client-metadata.json';

/**
 * Connecting an OAuth upstream (admin): `POST /v1/mcp/servers/:name/authorize` → `{authorization_url}` to open in a
 * browser; the authorization server sends the browser back to `GET /oauth/callback`, which stores the grant and
 * (through `onAuthorized`) connects the server. Neither answer ever carries a token.
 */
export function oauthRoutes(oauth: OAuthManager, onAuthorized: (server: string) => void, onRevoked: (server: string, subject: string) => void = () => {}): Router {
  const router = Router();

  router.post('/v1/mcp/servers/:name/authorize', async (req, res) => {
    const server = req.params.name as string;
    const access = accessOf(res);
    // Anyone with a subject may connect their own account to a per-user server they may use; the shared grant is the admin's.
    const own = !access.isAdmin && access.subject !== undefined && access.canSeeServer(server) && oauth.perUser(server);
    if (!own) assertAdmin(res);
    const authorizationUrl = await answer(() => (own ? oauth.authorizeUser(server, access.subject!, callbackFor(req)) : oauth.authorize(server, callbackFor(req))));
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
      const { server, subject } = await oauth.callback(query);
      if (subject === undefined) {
        onAuthorized(server);
        res.type('html').send(page('Connected', `toolrouter is now authorized for the MCP server "${server}" and is connecting to it. You can close this tab.`));
      } else {
        res.type('html').send(page('Connected', `Your calls to the MCP server "${server}" now act as your account. You can close this tab and call again.`));
      }
    } catch (error) {
      const status = error instanceof OAuthRequestError ? error.status : 502;
      const message = error instanceof Error ? error.message : String(error);
      res.status(status).type('html').send(page('Not connected', message));
    }
  });

  return router;
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

function page(title: string, message: string): string {
  const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html><meta charset="utf-8"><title>${escape(title)} · toolrouter</title><body style="font-family:system-ui;margin:3rem auto;max-width:40rem"><h1>${escape(title)}</h1><p>${escape(message)}</p></body>`;
}
