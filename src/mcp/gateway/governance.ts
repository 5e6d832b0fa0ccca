/**
 * The one governed path every tool call takes (src/mcp/gateway/gateway.ts callTool): policy decision, the secret
 * guardrail on arguments, a person's yes (@confirm) through the caller's client, the upstream call, the guardrail on
 * the result, and one audit record per attempt. It knows the seams only (CallPolicy, SecretGuard, AuditSink), never
 * Cedar or secretlint.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { Access } from '../../auth/access.js';
import type { AuditDecision, AuditEvent, AuditOutcome, AuditSink, AuditSurface } from '../../audit/types.js';
import type { SecretFinding, SecretGuard } from '../../guardrails/types.js';
import type { CallPolicy, PolicyAction, PolicyDecision, PolicyTarget } from '../../policy/types.js';
import type { RelayContext } from '../relay/channel.js';
import { UpstreamError } from '../upstream/index.js';

/** Counters the governed path bumps (src/metrics.ts; absent: none). */
export interface GovernanceMetrics {
  decision(decision: AuditDecision): void;
  confirmation(outcome: 'accepted' | 'declined' | 'unavailable' | 'allowed_without'): void;
  guardrailHit(rule: string, action: string): void;
}

/** What the assembly hands the gateway (src/server.ts); every part optional: without any, calls run as before. */
export interface GovernanceOptions {
  policy?: CallPolicy;
  guard?: SecretGuard;
  audit?: AuditSink;
  metrics?: GovernanceMetrics;
  log?: Logger;
}

/** Why a governed call was refused before it reached the upstream. */
export type GovernanceRefusal = 'policy_denied' | 'confirmation_required' | 'guardrail_blocked' | 'audit_unavailable';

export class GovernanceError extends Error {
  override readonly name = 'GovernanceError';
  constructor(
    readonly code: GovernanceRefusal,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export interface GovernedCall {
  action: PolicyAction;
  access: Access;
  target: PolicyTarget;
  arguments: Record<string, unknown> | undefined;
  surface: AuditSurface;
  relay?: RelayContext;
  signal?: AbortSignal;
  /** Runs the call upstream with these (possibly redacted) arguments. */
  run(args: Record<string, unknown> | undefined): Promise<unknown>;
}

/** Whether an upstream result is a tool's own error (isError), for the audit outcome. */
function isToolError(result: unknown): boolean {
  return typeof result === 'object' && result !== null && (result as CallToolResult).isError === true;
}

export class Governance {
  constructor(readonly options: GovernanceOptions) {}

  /** Whether any part is on; false: the gateway skips this path entirely (zero cost). */
  get active(): boolean {
    const { policy, guard, audit } = this.options;
    return policy?.active === true || (guard !== undefined && (guard.arguments !== 'off' || guard.results !== 'off')) || audit !== undefined;
  }

  async run<T>(call: GovernedCall): Promise<T> {
    const { policy, guard, audit, metrics, log } = this.options;
    const started = Date.now();
    const time = new Date(started).toISOString();
    const caller = policy?.callerOf(call.access);
    let auditArgs: unknown = call.arguments;
    const record = (decision: AuditDecision, policies: string[], outcome: AuditOutcome, error?: string) => {
      metrics?.decision(decision);
      audit?.record({
        time,
        surface: call.surface,
        action: call.action,
        caller: caller ? { kind: caller.kind, id: caller.id, groups: caller.groups } : { kind: call.access.kind, id: call.access.kind === 'key' ? (call.access.key?.keyId ?? '') : call.access.kind, groups: [] },
        tool: call.target.id,
        server: call.target.server,
        ...(auditArgs === undefined ? {} : { arguments: auditArgs }),
        decision,
        policies,
        outcome,
        ...(error === undefined ? {} : { error }),
        ms: Date.now() - started,
      } satisfies AuditEvent);
    };
    if (audit && !audit.accepting()) throw new GovernanceError('audit_unavailable', 'the audit trail cannot record calls right now and audit.required is set; retry later');

    // Credentials first: the audit record, the confirmation question and the log carry redacted arguments only.
    let args = call.arguments;
    let findings: SecretFinding[] = [];
    // Scanned also with arguments: off when there is an audit trail: its records carry credentials redacted, always.
    if (guard && args !== undefined && (guard.arguments !== 'off' || audit)) {
      const scanned = await guard.scan(args);
      auditArgs = scanned.redacted;
      if (guard.arguments !== 'off') {
        findings = scanned.findings;
        for (const finding of findings) metrics?.guardrailHit(finding.rule, guard.arguments);
      }
    }

    const decision: PolicyDecision | undefined = policy?.active ? policy.decide({ action: call.action, access: call.access, target: call.target, arguments: args, surface: call.surface }) : undefined;
    if (decision && !decision.allowed) {
      const named = decision.policies.length > 0 ? `policies ${decision.policies.join(', ')} forbid it` : 'no policy permits it';
      if (decision.enforced) {
        record('deny', decision.policies, 'not_run', 'policy_denied');
        throw new GovernanceError('policy_denied', `${call.action} "${call.target.id}" denied: ${named}`, { policies: decision.policies });
      }
      log?.info({ tool: call.target.id, policies: decision.policies }, 'policy would deny this call (policy.mode: log)');
    }

    if (findings.length > 0 && guard) {
      const rules = [...new Set(findings.map((finding) => finding.rule))];
      if (guard.arguments === 'block') {
        record('blocked', rules, 'not_run', 'guardrail_blocked');
        throw new GovernanceError('guardrail_blocked', `the arguments carry a credential (${rules.join(', ')} at ${findings.map((finding) => finding.path).join(', ')}); remove it and call again`, { rules });
      }
      if (guard.arguments === 'redact') args = auditArgs as Record<string, unknown>;
      else log?.warn({ tool: call.target.id, rules, paths: findings.map((finding) => finding.path) }, 'credential in tool arguments (guardrails.secrets.arguments: log)');
    }

    let confirmed = false;
    const question = decision?.allowed ? decision.confirm : undefined;
    if (question) {
      const answer = await this.confirm(call, question, auditArgs);
      if (answer === 'unavailable') {
        if (decision!.confirmWithoutElicitation === 'allow') {
          metrics?.confirmation('allowed_without');
        } else {
          metrics?.confirmation('unavailable');
          record('deny', [question.policy], 'not_run', 'confirmation_required');
          throw new GovernanceError('confirmation_required', `policy ${question.policy} needs a person's confirmation, and this client cannot be asked: ${question.question}`, { policies: [question.policy] });
        }
      } else if (answer === 'declined') {
        metrics?.confirmation('declined');
        record('declined', [question.policy], 'not_run', 'declined');
        return { content: [{ type: 'text', text: `The user declined the call of "${call.target.id}" (${question.policy}: ${question.question}); it was not run.` }], isError: true } as T;
      } else {
        metrics?.confirmation('accepted');
        confirmed = true;
      }
    }

    const policies = decision?.policies ?? [];
    const decided: AuditDecision = decision && !decision.allowed ? 'deny' : confirmed ? 'confirmed' : 'permit';
    let result: unknown;
    try {
      result = await call.run(args);
    } catch (error) {
      const timeout = error instanceof UpstreamError ? error.code === 'upstream_timeout' : (error as { code?: unknown }).code === 'upstream_timeout';
      record(decided, policies, timeout ? 'timeout' : 'upstream_error', (error as { code?: string }).code ?? 'error');
      throw error;
    }
    if (guard && guard.results !== 'off') {
      const scanned = await guard.scan(result);
      if (scanned.findings.length > 0) {
        for (const finding of scanned.findings) metrics?.guardrailHit(finding.rule, guard.results);
        if (guard.results === 'redact') result = scanned.redacted;
        else log?.warn({ tool: call.target.id, rules: scanned.findings.map((finding) => finding.rule) }, 'credential in a tool result (guardrails.secrets.results: log)');
      }
    }
    record(decided, policies, isToolError(result) ? 'tool_error' : 'ok');
    return result as T;
  }

  /** Asks the caller's client (form elicitation; an input-required round on 2026-07-28). */
  private async confirm(call: GovernedCall, question: { question: string; policy: string }, args: unknown): Promise<'accepted' | 'declined' | 'unavailable'> {
    const channel = call.relay?.channel;
    if (!channel || !channel.supports('elicitation.form')) return 'unavailable';
    const message = [
      question.question,
      `Tool: ${call.target.id} (server ${call.target.server})`,
      `Arguments: ${JSON.stringify(args ?? {}).slice(0, 4_000)}`,
      `Policy: ${question.policy}`,
    ].join('\n');
    try {
      const answer = (await channel.request('elicitation/create', {
        mode: 'form',
        message,
        requestedSchema: { type: 'object', properties: {} },
      }, call.signal ?? new AbortController().signal)) as { action?: string };
      return answer?.action === 'accept' ? 'accepted' : 'declined';
    } catch (error) {
      this.options.log?.warn({ err: error, tool: call.target.id }, 'confirmation could not be asked; treated as declined');
      return 'declined';
    }
  }
}
