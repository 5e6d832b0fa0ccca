/**
 * Upstream servers at run time (admin): `PUT /v1/mcp/servers/:name` adds or replaces one (the fields of an mcp.servers
 * entry), `DELETE` removes it, `POST .../reconnect` connects it again now. Servers from the config file or an imported
 * client config are changed there, not here (409). Secrets in `headers` and `env` are stored, never answered.
 */
import { Router } from 'express';
import type { Catalog } from '../../catalog/catalog.js';
import { assertAdmin } from '../../http/auth.js';
import { HttpError, parseBody } from '../../http/errors.js';
import type { RuntimeServerStore } from '../upstream/runtime-servers.js';
import { mcpServerSchema, SERVER_NAME, SERVER_NAME_MESSAGE } from '../settings.js';
import type { UpstreamManager, UpstreamServerConfig } from '../upstream/index.js';

export const MASK = '***';

/** A server's settings safe to show: every env and header value masked (they carry tokens), as `config check` does. */
export function maskServer(config: UpstreamServerConfig): Record<string, unknown> {
  const masked: Record<string, unknown> = { ...config };
  for (const field of ['env', 'headers'] as const) {
    const values = (config as unknown as Record<string, unknown>)[field] as Record<string, string> | undefined;
    if (values) masked[field] = Object.fromEntries(Object.keys(values).map((key) => [key, MASK]));
  }
  if ('url' in config) masked.url = config.url.replace(/\/\/([^:@/]*):[^@/]*@/, `//$1:${MASK}@`);
  return masked;
}

/** A config entry is a few hundred bytes; this bounds what is validated and stored. */
const MAX_SERVER_BYTES = 64 * 1024;

export function mcpServerRoutes(deps: { upstreams: UpstreamManager; catalog: Catalog; store: RuntimeServerStore; runtimeStdio: boolean }): Router {
  const { upstreams, catalog, store } = deps;
  const router = Router();

  router.put('/v1/mcp/servers/:name', async (req, res) => {
    assertAdmin(res);
    const name = checkName(req.params.name);
    if (JSON.stringify(req.body ?? null).length > MAX_SERVER_BYTES) throw new HttpError(413, 'payload_too_large', `an MCP server's settings must be at most ${MAX_SERVER_BYTES} bytes of JSON`);
    const { disabled, ...config } = parseBody(mcpServerSchema, req.body);
    if (disabled !== undefined) throw new HttpError(400, 'invalid_request', 'disabled: not taken at run time; DELETE the server to stop it');
    if ('command' in config && !deps.runtimeStdio) {
      throw new HttpError(
        403,
        'forbidden',
        'stdio servers cannot be added at run time: starting a local process is code execution on this host. Set mcp.runtimeStdio: true to allow it, or add the server to the config file',
      );
    }
    const existing = upstreams.configOf(name);
    if (existing && existing.origin !== 'runtime') {
      throw new HttpError(409, 'conflict', `server "${name}" comes from ${fromWhere(existing.origin)}; change it there (servers from files cannot be changed at run time)`);
    }
    if (!existing && catalog.hasSource(name)) throw new HttpError(409, 'conflict', `"${name}" is a static catalog source; an MCP server needs another name`);
    await store.put(name, config);
    res.status(existing ? 200 : 201).json({ server: { name, origin: 'runtime', ...maskServer(config) }, status: upstreams.statusOf(name) });
  });

  router.delete('/v1/mcp/servers/:name', async (req, res) => {
    assertAdmin(res);
    const name = checkName(req.params.name);
    const existing = upstreams.configOf(name);
    if (existing && existing.origin !== 'runtime') {
      throw new HttpError(409, 'conflict', `server "${name}" comes from ${fromWhere(existing.origin)} and cannot be deleted at run time; remove it there and restart`);
    }
    if (!(await store.delete(name))) throw new HttpError(404, 'not_found', `no MCP server named "${name}"`);
    res.json({ deleted: name });
  });

  router.post('/v1/mcp/servers/:name/reconnect', (req, res) => {
    assertAdmin(res);
    const name = checkName(req.params.name);
    if (!upstreams.reconnect(name)) throw new HttpError(404, 'not_found', `no MCP server named "${name}"`);
    res.status(202).json({ status: upstreams.statusOf(name) });
  });

  return router;
}

function checkName(name: string): string {
  if (!SERVER_NAME.test(name)) throw new HttpError(400, 'invalid_request', `name: ${SERVER_NAME_MESSAGE}`);
  return name;
}

function fromWhere(origin: string): string {
  return origin === 'config' ? 'the config file (mcp.servers)' : 'an imported MCP client config (mcp.import / --mcp-config)';
}
