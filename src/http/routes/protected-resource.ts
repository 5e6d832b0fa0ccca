import { Router } from 'express';
import type { Identity } from '../../auth/identity/identity.js';
import { MCP_RESOURCE_PATH, PROTECTED_RESOURCE_PATH } from '../../auth/identity/metadata.js';

/**
 * RFC 9728 metadata, public (clients read it before they have a token): at the well-known path, and at its form
 * suffixed with /mcp, the URL a 401 from /mcp names. Both describe /mcp, the resource toolrouter's tokens are for.
 */
export function protectedResourceRoutes(identity: Identity): Router {
  const router = Router();
  for (const path of [PROTECTED_RESOURCE_PATH, `${PROTECTED_RESOURCE_PATH}${MCP_RESOURCE_PATH}`]) {
    router.get(path, (req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=300');
      // Browser-based clients (an MCP inspector) read it across origins; it is public and carries no secret.
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.json(identity.metadata(identity.resource({ protocol: req.protocol, host: req.get('host') })));
    });
  }
  return router;
}
