import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** What a virtual key may do. Stored by the hash of its secret; the secret itself is shown once, at generation. */
export interface KeyRecord {
  /** Public handle for listing and deleting; not a credential. */
  keyId: string;
  /** SHA-256 of the secret, hex: what a presented key is looked up by. */
  secretHash: string;
  alias?: string;
  /** Servers (upstream MCP server names, or static source names) whose tools the key sees; undefined: all. */
  allowedServers?: string[];
  /** Qualified tool names the key sees (within its servers); undefined: all. */
  allowedTools?: string[];
  /** false: no search_tools/call_tool, no search API; the key gets the full (filtered) listing instead. */
  toolSearchEnabled: boolean;
  /** Code mode's `execute` for this key: true or false whatever mcp.codeMode says; undefined: as mcp.codeMode says. */
  codeModeEnabled?: boolean;
  /** Requests per minute; undefined: unlimited. */
  rpmLimit?: number;
  /** Epoch milliseconds after which the key is refused; undefined: never. */
  expiresAt?: number;
  createdAt: number;
  metadata?: Record<string, unknown>;
  /**
   * The key belongs to a service acting for several users: a request may name one in `x-toolrouter-user`, and upstreams
   * with per-user grants then act as that user (only a key the admin trusts with it gets this).
   */
  assertUser?: boolean;
}

/** Secrets are prefixed so they are recognisable in configs and secret scanners. */
export const SECRET_PREFIX = 'sk-tr-';

export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(24).toString('base64url');
}

export function generateKeyId(): string {
  return `key_${randomBytes(8).toString('hex')}`;
}

/**
 * Secrets are 192 random bits, so a fast hash is enough: nothing can be guessed from it, and a slow password hash
 * would cost every request.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** Compares in constant time, so response timing says nothing about how much of a guess was right. */
export function sameSecret(presented: string, expected: string): boolean {
  return timingSafeEqual(Buffer.from(hashSecret(presented), 'hex'), Buffer.from(hashSecret(expected), 'hex'));
}

/** A key as the API shows it: never the secret or its hash. */
export function publicKeyInfo(record: KeyRecord): Record<string, unknown> {
  return {
    key_id: record.keyId,
    key_alias: record.alias ?? null,
    allowed_servers: record.allowedServers ?? null,
    allowed_tools: record.allowedTools ?? null,
    tool_search_enabled: record.toolSearchEnabled,
    code_mode_enabled: record.codeModeEnabled ?? null,
    rpm_limit: record.rpmLimit ?? null,
    expires: record.expiresAt === undefined ? null : new Date(record.expiresAt).toISOString(),
    created_at: new Date(record.createdAt).toISOString(),
    metadata: record.metadata ?? {},
    assert_user: record.assertUser === true,
  };
}

/** `30s`, `15m`, `12h`, `30d` (LiteLLM's `duration` format) → milliseconds; undefined when not of that form. */
export function parseDuration(duration: string): number | undefined {
  const match = /^(\d{1,9})([smhd])$/.exec(duration.trim());
  if (!match) return undefined;
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * unit;
}
