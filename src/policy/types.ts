/**
 * The governance seam the MCP gateway calls (src/mcp/gateway): what a policy decided about one attempt and what it
 * takes to decide. The gateway knows these types only; Cedar stays in src/policy, secretlint in src/guardrails.
 */
import type { Access } from '../auth/access.js';
import type { AuditAction, AuditSurface } from '../audit/types.js';

export type PolicyAction = AuditAction;
export type PolicySurface = AuditSurface;

/** The caller as policies see it: `Caller::"<id>"` in `Group::"<g>"` for each group. */
export interface PolicyCaller {
  id: string;
  /** admin, open, anonymous, key, user */
  kind: string;
  groups: string[];
  keyAlias?: string;
  claims: Record<string, string[]>;
}

/** What is called: a tool by catalog name (`Tool`), a resource by URI (`Resource`), a prompt by name (`Prompt`). */
export interface PolicyTarget {
  /** The entity id: the catalog name, URI or prompt name. */
  id: string;
  /** The upstream's own name for it. */
  name: string;
  server: string;
  /** The tool's annotations (hints), as it declared them. */
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
}

export interface PolicyQuestion {
  action: PolicyAction;
  access: Access;
  target: PolicyTarget;
  arguments?: Record<string, unknown>;
  surface: PolicySurface;
}

export interface PolicyDecision {
  /** What the policies say (in `log` mode the call goes on whatever this is). */
  allowed: boolean;
  /** Whether a denial refuses the call (`enforce`) or is only recorded (`log`). */
  enforced: boolean;
  /** The deciding policies' ids: the satisfied forbids of a denial, the satisfied permits of a permit. */
  policies: string[];
  /** A satisfied permit annotated @confirm("question"): a person must say yes first. */
  confirm?: { question: string; policy: string };
  /** Whether the caller's client cannot be asked and confirmations are then allowed without (confirmWithoutElicitation). */
  confirmWithoutElicitation: 'deny' | 'allow';
}

/** What the gateway asks of policy. Absent (no policy files): every call goes on as before. */
export interface CallPolicy {
  /** Whether any policy is loaded; false: decide is never asked. */
  readonly active: boolean;
  decide(question: PolicyQuestion): PolicyDecision;
  /** Whether some arguments could make a policy permit this call (search and listing hide the tool otherwise). */
  mayPermit(access: Access, target: PolicyTarget, action?: PolicyAction): boolean;
  /** Names what `mayPermit` depends on for this caller (policy set version, principal, groups, attributes). */
  viewKey(access: Access): string;
  /** The caller as policies see it (for the audit record). */
  callerOf(access: Access): PolicyCaller;
}
