import { Router } from 'express';
import { z } from 'zod';
import type { KeyStore } from '../../auth/key-store.js';
import { generateKeyId, generateSecret, hashSecret, parseDuration, publicKeyInfo, SECRET_PREFIX, type KeyRecord } from '../../auth/keys.js';
import type { KeyDefaults } from '../../auth/settings.js';
import { requireAdmin } from '../auth.js';
import { badRequest, HttpError, parseBody } from '../errors.js';

const names = (what: string) => z.array(z.string().min(1).max(256), { error: `must be a list of ${what}` }).max(10_000);

/** What a key may carry, as generate and update accept it. */
const keyFields = {
  key_alias: z.string().min(1).max(256).optional(),
  allowed_servers: names('server names').optional(),
  allowed_tools: names('tool names').optional(),
  tool_search_enabled: z.boolean({ error: 'must be true or false' }).optional(),
  /** Code mode's `execute` (mcp.codeMode) for this key; null or absent: as the service says. */
  code_mode_enabled: z.boolean({ error: 'must be true, false or null' }).nullable().optional(),
  rpm_limit: z.number().int('must be an integer').min(1).max(1_000_000).nullable().optional(),
  /** LiteLLM's form: "30s", "15m", "12h", "30d"; null: never expires. */
  duration: z
    .string()
    .refine((duration) => parseDuration(duration) !== undefined, { error: (issue) => `"${String(issue.input)}" is not a duration like 30s, 15m, 12h or 30d` })
    .nullable()
    .optional(),
  /** Or an absolute time, in the future. */
  expires: z.iso
    .datetime({ offset: true, error: 'must be an ISO 8601 date-time' })
    .refine((time) => Date.parse(time) > Date.now(), 'must be in the future')
    .nullable()
    .optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  /** The key may name the user it acts for in `x-toolrouter-user` (upstreams with per-user grants then act as that user). */
  assert_user: z.boolean({ error: 'must be true or false' }).optional(),
};

/**
 * Every problem of a body in one answer, the conflict between `duration` and `expires` included: the check runs even
 * when a field is already bad (zod skips object-level checks after a field's issue unless told `when`).
 */
function withExpiryRule<T extends z.ZodObject>(schema: T) {
  return schema.check(
    z.superRefine((body: { duration?: unknown; expires?: unknown }, ctx) => {
      if (body.duration && body.expires) ctx.addIssue({ code: 'custom', path: ['duration'], message: 'give duration or expires, not both' });
    }, { when: () => true }),
  );
}

const generateBody = withExpiryRule(z.object(keyFields).strict());
/** Update names the key and gives only what changes; null lifts a restriction (all servers, all tools, no limit, no expiry). */
const updateBody = withExpiryRule(
  z
    .object({
      ...keyFields,
      key: z.string({ error: 'is required: a key or its key_id' }).min(1),
      allowed_servers: names('server names').nullable().optional(),
      allowed_tools: names('tool names').nullable().optional(),
    })
    .strict(),
);

const deleteBody = z.object({ keys: z.array(z.string().min(1), { error: 'must be a list of keys or key ids' }).min(1).max(1_000) }).strict();

/**
 * LiteLLM-style key management, admin only: `POST /key/generate`, `GET /key/info?key=`, `POST /key/update`,
 * `POST /key/delete`, `GET /key/list`. The secret is returned once, by generate; afterwards keys are named by their `key_id` (or the secret).
 */
export function keyRoutes({ store, defaults }: { store: KeyStore; defaults: KeyDefaults }): Router {
  const router = Router();
  router.use('/key', requireAdmin);

  router.post('/key/generate', async (req, res) => {
    const body = parseBody(generateBody, req.body);
    const expiresAt = expiry(body.duration === undefined && body.expires === undefined ? { duration: defaults.duration } : body);
    const secret = generateSecret();
    const record: KeyRecord = {
      keyId: generateKeyId(),
      secretHash: hashSecret(secret),
      ...(body.key_alias === undefined ? {} : { alias: body.key_alias }),
      ...optional('allowedServers', body.allowed_servers ?? defaults.allowed_servers, unique),
      ...optional('allowedTools', body.allowed_tools ?? defaults.allowed_tools, unique),
      toolSearchEnabled: body.tool_search_enabled ?? defaults.tool_search_enabled,
      ...optional('codeModeEnabled', body.code_mode_enabled, (enabled) => enabled),
      ...optional('rpmLimit', body.rpm_limit === undefined ? defaults.rpm_limit : body.rpm_limit, (limit) => limit),
      ...optional('expiresAt', expiresAt, (time) => time),
      createdAt: Date.now(),
      ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
      ...(body.assert_user ? { assertUser: true } : {}),
    };
    await store.add(record);
    res.json({ key: secret, ...publicKeyInfo(record) });
  });

  router.get('/key/info', async (req, res) => {
    const named = typeof req.query.key === 'string' ? req.query.key : undefined;
    if (!named) throw badRequest('query parameter "key" (a key or its key_id) is required');
    const [record] = await find(store, [named]);
    res.json({ key: record!.keyId, info: publicKeyInfo(record!) });
  });

  router.get('/key/list', async (_req, res) => {
    res.json({ keys: (await store.list()).map(publicKeyInfo) });
  });

  router.post('/key/update', async (req, res) => {
    const body = parseBody(updateBody, req.body);
    const [record] = await find(store, [body.key]);
    const expiresAt = expiry(body);
    const { allowedServers, allowedTools, rpmLimit, assertUser, codeModeEnabled, ...rest } = record!;
    const updated: KeyRecord = {
      ...rest,
      ...(body.key_alias === undefined ? {} : { alias: body.key_alias }),
      ...optional('allowedServers', body.allowed_servers === undefined ? allowedServers : body.allowed_servers, unique),
      ...optional('allowedTools', body.allowed_tools === undefined ? allowedTools : body.allowed_tools, unique),
      ...optional('rpmLimit', body.rpm_limit === undefined ? rpmLimit : body.rpm_limit, (limit) => limit),
      ...optional('codeModeEnabled', body.code_mode_enabled === undefined ? codeModeEnabled : body.code_mode_enabled, (enabled) => enabled),
      ...(body.tool_search_enabled === undefined ? {} : { toolSearchEnabled: body.tool_search_enabled }),
      ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
      ...((body.assert_user ?? assertUser) ? { assertUser: true } : {}),
    };
    // undefined: keep the expiry; null: never expires.
    if (expiresAt === null) delete updated.expiresAt;
    else if (expiresAt !== undefined) updated.expiresAt = expiresAt;
    await store.add(updated);
    res.json({ key: updated.keyId, info: publicKeyInfo(updated) });
  });

  router.post('/key/delete', async (req, res) => {
    const { keys } = parseBody(deleteBody, req.body);
    // All named keys must exist, or nothing is deleted: a typo must not leave a half-done revocation unnoticed.
    const records = await find(store, keys);
    const removed = await store.remove(records.map((record) => record.secretHash));
    res.json({ deleted_keys: removed.map((record) => record.keyId) });
  });

  return router;
}

/**
 * When a key expires, from `duration` or `expires` (both checked by the body's schema): a time, null for never,
 * undefined when neither was given. A duration counts from now.
 */
function expiry(body: { duration?: string | null | undefined; expires?: string | null | undefined }): number | null | undefined {
  if (body.duration === null || body.expires === null) return null;
  if (body.expires) return Date.parse(body.expires);
  if (body.duration) return Date.now() + parseDuration(body.duration)!;
  return undefined;
}

const unique = (list: string[]) => [...new Set(list)];

/** `{[field]: convert(value)}`, or nothing when the value is null or undefined (the record leaves the field out). */
function optional<K extends string, T, R>(field: K, value: T | null | undefined, convert: (value: T) => R): { [P in K]?: R } {
  return value === null || value === undefined ? {} : ({ [field]: convert(value) } as { [P in K]?: R });
}

/** Resolves keys named by secret or key_id; a 404 names every one that does not exist. */
async function find(store: KeyStore, named: string[]): Promise<KeyRecord[]> {
  const all = named.some((name) => !name.startsWith(SECRET_PREFIX)) ? await store.list() : [];
  const byId = new Map(all.map((record) => [record.keyId, record]));
  const found: KeyRecord[] = [];
  const missing: string[] = [];
  for (const name of new Set(named)) {
    const record = name.startsWith(SECRET_PREFIX) ? await store.bySecretHash(hashSecret(name)) : byId.get(name);
    if (record) found.push(record);
    else missing.push(name.startsWith(SECRET_PREFIX) ? `${name.slice(0, SECRET_PREFIX.length + 4)}…` : name);
  }
  if (missing.length > 0) throw new HttpError(404, 'not_found', `no such key: ${missing.join(', ')}`);
  return found;
}
