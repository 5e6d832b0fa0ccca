/** `POST /v1/policy/check` (admin): what policy would decide for a caller, a tool and arguments (docs/governance.md). */
import { Router } from 'express';
import { z } from 'zod';
import { Access } from '../../auth/access.js';
import type { KeyRecord } from '../../auth/keys.js';
import { assertAdmin } from '../../http/auth.js';
import { badRequest, parseBody } from '../../http/errors.js';
import type { McpGateway } from '../gateway/gateway.js';

const checkBody = z
  .object({
    caller: z
      .object({
        key_id: z.string().min(1).max(200).optional(),
        /** A signed-in user's `sub` (the principal is `user:<sub>`); or `admin` / `open` for those callers. */
        subject: z.string().min(1).max(500).optional(),
        groups: z.array(z.string().max(500)).max(256).optional(),
        claims: z.record(z.string(), z.union([z.string(), z.array(z.string())])).optional(),
      })
      .strict(),
    tool: z.string().min(1).max(500),
    arguments: z.record(z.string(), z.unknown()).optional(),
    surface: z.enum(['mcp', 'rest', 'code']).optional(),
  })
  .strict();

export interface PolicyRouteOptions {
  gateway: McpGateway;
  /** The stored keys (a key_id's alias and metadata.groups are part of its principal). */
  keys: () => Promise<KeyRecord[]>;
  /** policy.groupsClaim: where a subject's `groups` go among its claims. */
  groupsClaim: string;
}

export function policyRoutes({ gateway, keys, groupsClaim }: PolicyRouteOptions): Router {
  const router = Router();
  router.post('/v1/policy/check', async (req, res) => {
    assertAdmin(res);
    const body = parseBody(checkBody, req.body);
    const { caller } = body;
    if ((caller.key_id === undefined) === (caller.subject === undefined)) throw badRequest('caller needs exactly one of key_id and subject');
    let access: Access;
    if (caller.key_id !== undefined) {
      const stored = (await keys()).find((record) => record.keyId === caller.key_id);
      const groups = [...new Set([...stringList(stored?.metadata?.groups), ...(caller.groups ?? [])])];
      const record: KeyRecord = {
        ...(stored ?? { keyId: caller.key_id, secretHash: '', createdAt: 0, toolSearchEnabled: true }),
        metadata: { ...stored?.metadata, groups },
      } as KeyRecord;
      access = Access.forKey(record);
    } else if (caller.subject === 'admin' || caller.subject === 'open') {
      access = caller.subject === 'admin' ? Access.admin : Access.open;
    } else {
      const claims: Record<string, unknown> = { ...caller.claims, ...(caller.groups ? { [groupsClaim]: caller.groups } : {}) };
      access = Access.forUser({ keyId: `check_${caller.subject}`, secretHash: '', createdAt: 0, toolSearchEnabled: true } as KeyRecord, caller.subject!, claims);
    }
    res.json(gateway.checkPolicy(body.tool, body.arguments, access, body.surface));
  });
  return router;
}

function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}
