/** The audit trail's settings (YAML `audit`). Assembled by `src/config/`. */
import { z } from 'zod';

/** One record per call attempt on every face, hash-chained (src/audit, docs/audit.md). */
export const auditSettingsSchema = z
  .object({
    /** Record every tool call, resource read and prompt attempt. */
    enabled: z.boolean().default(true),
    /**
     * What a record keeps of the call's arguments (credentials are always redacted first): full, hash (`sha256:<hex>`
     * of their canonical JSON: proves what was sent without keeping it), off.
     */
    arguments: z.enum(['full', 'hash', 'off']).default('hash'),
    /** Most records kept; the oldest go first (Redis: XADD MAXLEN ~; files: whole files pruned). */
    maxEntries: z.number().int().min(1000).default(1_000_000),
    /** Records older than this many days are pruned. */
    maxAgeDays: z.number().positive().default(90),
    /**
     * Fail calls closed (`audit_unavailable`, 503) while the audit store cannot take records, instead of going on with
     * records queued (and dropped once the queue is full).
     */
    required: z.boolean().default(false),
    /** Records waiting to be written; past it new ones are dropped and counted (toolrouter_audit_dropped_total). */
    queueSize: z.number().int().min(1).default(10_000),
  })
  .prefault({});

export type AuditSettings = z.output<typeof auditSettingsSchema>;
