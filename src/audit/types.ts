/**
 * The audit trail's seam: what every face hands over for each call attempt (an AuditEvent), and what the trail keeps
 * (an AuditRecord: the event plus where it was written and its place in the SHA-256 chain). The call path (the MCP
 * gateway's governed calls) only knows `AuditSink`; stores, the chain, rotation and reading live beside this file.
 */

/** What the governance seam decided about an attempt. */
export type AuditDecision = 'permit' | 'deny' | 'confirmed' | 'declined' | 'blocked';

/** How the attempt ended: `not_run` when it never reached the upstream (denied, declined, blocked, invalid). */
export type AuditOutcome = 'ok' | 'tool_error' | 'upstream_error' | 'timeout' | 'not_run';

/** Which face the attempt came through. */
export type AuditSurface = 'mcp' | 'rest' | 'code';

/** The Cedar action the attempt was (src/policy). */
export type AuditAction = 'call_tool' | 'read_resource' | 'get_prompt';

export interface AuditCaller {
  /** Access kind: `admin`, `open`, `key`, `anonymous`; a signed-in user is `user`. */
  kind: string;
  /** The Cedar principal id: `admin`, `open`, a key's key_id, `user:<sub>`. */
  id: string;
  groups: string[];
}

/** One call attempt as a face saw it. Arguments arrive with credentials already redacted (src/guardrails). */
export interface AuditEvent {
  /** ISO 8601, when the attempt started. */
  time: string;
  surface: AuditSurface;
  action: AuditAction;
  caller: AuditCaller;
  /** The catalog name of the tool (or the resource URI / prompt name for the other actions). */
  tool: string;
  server?: string;
  /** As the call carried them, credentials redacted; the audit log applies `audit.arguments` (full, hash, off). */
  arguments?: unknown;
  decision: AuditDecision;
  /** The `@id`s of the policies that decided (or the guardrail rule, for `blocked`). */
  policies: string[];
  outcome: AuditOutcome;
  /** A short reason for a refusal or failure (never an argument value). */
  error?: string;
  ms: number;
  task?: string;
  trace?: string;
}

/** An event as the trail keeps it. */
export interface AuditRecord extends Omit<AuditEvent, 'arguments'> {
  /** Stable id, usable as a cursor (the Redis stream id, or `<file>:<line>` for files). */
  id: string;
  instance: string;
  /** After `audit.arguments`: the arguments, `sha256:<hex>` of their canonical JSON, or absent. */
  arguments?: unknown;
  /** SHA-256 (hex) of the previous record's `hash`, '' for the first of a chain. */
  prev: string;
  /** SHA-256 (hex) over `prev` and this record's canonical JSON without `id` and `hash`. */
  hash: string;
}

/** What the call path writes to. Never blocks a call: records are queued and written in the background. */
export interface AuditSink {
  record(event: AuditEvent): void;
  /**
   * Whether calls may go on: false while the store is unreachable and `audit.required` is set (calls then fail
   * closed with `audit_unavailable`). Always true when audit is not required.
   */
  accepting(): boolean;
}
