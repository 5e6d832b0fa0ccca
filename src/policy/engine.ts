import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import type { Logger } from 'pino';
import type { Access } from '../auth/access.js';
import { cedarArguments } from './arguments.js';
import type { CompiledPolicies } from './load.js';
import { contextFree } from './visibility.js';
import type { PolicySettings } from './settings.js';
import type { CallPolicy, PolicyAction, PolicyCaller, PolicyDecision, PolicyQuestion, PolicyTarget } from './types.js';

/** Views whose visibility answers are remembered; beyond this the oldest view is dropped. */
const MAX_VIEWS = 1_000;
/** Answers remembered per view (one per tool, resource or prompt asked about). */
const MAX_ANSWERS_PER_VIEW = 200_000;
/** Groups taken from one key's metadata or one token's claim. */
const MAX_GROUPS = 256;

const RESOURCE_TYPE: Record<PolicyAction, string> = { call_tool: 'Tool', read_resource: 'Resource', get_prompt: 'Prompt' };
const UNKNOWN_CONTEXT = { arguments: { __extn: { fn: 'unknown', arg: 'arguments' } }, surface: { __extn: { fn: 'unknown', arg: 'surface' } } };

/**
 * toolrouter's Cedar authorizer: one policy set at a time (swapped whole on reload, never edited), asked "may this
 * caller do this action on this tool with these arguments, through this surface?" and "could any arguments make it
 * so?" (partial evaluation with the context unknown: search and listing hide what no call could use). Cedar's
 * semantics hold: default deny, a satisfied forbid overrides every permit.
 */
export class PolicyEngine implements CallPolicy {
  private compiled: CompiledPolicies | undefined;
  private setId = '';
  private readonly callers = new WeakMap<Access, { caller: PolicyCaller; principal: string; entities: cedar.EntityJson[] }>();
  private readonly views = new Map<string, Map<string, boolean>>();

  constructor(
    readonly settings: PolicySettings,
    private readonly log?: Logger,
  ) {}

  get active(): boolean {
    return this.compiled !== undefined;
  }

  /** The loaded set's version (a hash of its sources); '' when none is loaded. */
  get version(): string {
    return this.compiled?.version ?? '';
  }

  get policies(): CompiledPolicies | undefined {
    return this.compiled;
  }

  /** Makes `compiled` the policy set from the next decision on; requests already deciding finish with the old one. */
  use(compiled: CompiledPolicies): void {
    if (compiled.version === this.compiled?.version) return;
    const id = `toolrouter-${compiled.version}`;
    const prepared = cedar.preparsePolicySet(id, { staticPolicies: compiled.policies });
    if (prepared.type === 'failure') throw new Error(`cannot prepare policies: ${prepared.errors.map((error) => error.message).join('; ')}`);
    const view = cedar.preparsePolicySet(`${id}-view`, { staticPolicies: contextFree(compiled.policies) });
    if (view.type === 'failure') throw new Error(`cannot prepare the visibility policies: ${view.errors.map((error) => error.message).join('; ')}`);
    this.compiled = compiled;
    this.setId = id;
    this.views.clear();
  }

  decide(question: PolicyQuestion): PolicyDecision {
    const base = { enforced: this.settings.mode === 'enforce', confirmWithoutElicitation: this.settings.confirmWithoutElicitation };
    const compiled = this.compiled;
    if (!compiled) return { allowed: true, policies: [], ...base };
    const { principal, entities } = this.principalOf(question.access);
    const resource = { type: RESOURCE_TYPE[question.action], id: question.target.id };
    const answer = cedar.statefulIsAuthorized({
      principal,
      action: { type: 'Action', id: question.action },
      resource,
      context: { arguments: cedarArguments(question.arguments), surface: question.surface },
      preparsedPolicySetId: this.setId,
      entities: [...entities, targetEntity(question.action, question.target)],
    });
    if (answer.type === 'failure') {
      // Cedar refused the request itself (never expected: the entities are built here). Deny, and say why in the log.
      this.log?.error({ errors: answer.errors.map((error) => error.message) }, 'policy evaluation failed; denying');
      return { allowed: false, policies: [], ...base };
    }
    const { decision, diagnostics } = answer.response;
    if (diagnostics.errors.length > 0) {
      this.log?.debug({ errors: diagnostics.errors.map((error) => `${error.policyId}: ${error.error.message}`) }, 'policies skipped for evaluation errors');
    }
    const policies = diagnostics.reason;
    if (decision !== 'allow') return { allowed: false, policies, ...base };
    for (const policy of policies) {
      const question = compiled.annotations[policy]?.confirm;
      if (question !== undefined) return { allowed: true, policies, confirm: { question, policy }, ...base };
    }
    return { allowed: true, policies, ...base };
  }

  mayPermit(access: Access, target: PolicyTarget, action: PolicyAction = 'call_tool'): boolean {
    if (!this.compiled) return true;
    const key = this.viewKey(access);
    let answers = this.views.get(key);
    if (!answers) {
      if (this.views.size >= MAX_VIEWS) this.views.delete(this.views.keys().next().value!);
      answers = new Map();
      this.views.set(key, answers);
    }
    const memo = `${action}\u0000${target.id}`;
    let may = answers.get(memo);
    if (may === undefined) {
      may = this.partial(access, target, action);
      if (answers.size >= MAX_ANSWERS_PER_VIEW) answers.clear();
      answers.set(memo, may);
    }
    return may;
  }

  viewKey(access: Access): string {
    return this.compiled ? `${this.compiled.version}\u0000${this.principalOf(access).key}` : '';
  }

  callerOf(access: Access): PolicyCaller {
    return this.principalOf(access).caller;
  }

  /**
   * False only when no context could permit the call: a forbid holds whatever the context, or no permit can hold.
   * Asked of the context-free set (visibility.ts), prepared beside the real one.
   */
  private partial(access: Access, target: PolicyTarget, action: PolicyAction): boolean {
    const { principal, entities } = this.principalOf(access);
    const answer = cedar.statefulIsAuthorized({
      principal,
      action: { type: 'Action', id: action },
      resource: { type: RESOURCE_TYPE[action], id: target.id },
      context: { arguments: {}, surface: '' },
      preparsedPolicySetId: `${this.setId}-view`,
      entities: [...entities, targetEntity(action, target)],
    });
    if (answer.type === 'failure') return true;
    return answer.response.decision === 'allow';
  }

  /** The same question by Cedar's partial evaluation with the context unknown (slow: parses the set per call; tests). */
  partiallyEvaluated(access: Access, target: PolicyTarget, action: PolicyAction = 'call_tool'): boolean {
    if (!this.compiled) return true;
    const { principal, entities } = this.principalOf(access);
    const answer = cedar.isAuthorizedPartial({
      principal,
      action: { type: 'Action', id: action },
      resource: { type: RESOURCE_TYPE[action], id: target.id },
      context: UNKNOWN_CONTEXT as unknown as cedar.Context,
      policies: { staticPolicies: this.compiled.policies },
      entities: [...entities, targetEntity(action, target)],
    });
    if (answer.type === 'failure') return true;
    return answer.response.decision !== 'deny';
  }

  private principalOf(access: Access): { caller: PolicyCaller; principal: cedar.TypeAndId; entities: cedar.EntityJson[]; key: string } {
    let known = this.callers.get(access) as ({ caller: PolicyCaller; principal: string; entities: cedar.EntityJson[] } & { key?: string }) | undefined;
    if (!known) {
      const caller = callerOf(access, this.settings);
      const attrs: Record<string, cedar.CedarValueJson> = { kind: caller.kind, claims: caller.claims };
      if (caller.keyAlias !== undefined) attrs.key_alias = caller.keyAlias;
      const entities: cedar.EntityJson[] = [
        { uid: { type: 'Caller', id: caller.id }, attrs, parents: caller.groups.map((id) => ({ type: 'Group', id })) },
        // Group entities need not be listed: membership is the Caller's parents, and groups have no attributes.
      ];
      known = { caller, principal: caller.id, entities, key: JSON.stringify([caller.id, caller.kind, caller.keyAlias ?? null, caller.groups, caller.claims]) };
      this.callers.set(access, known);
    }
    return { caller: known.caller, principal: { type: 'Caller', id: known.principal }, entities: known.entities, key: known.key! };
  }
}

/** The caller as the model says: `admin`, `open`, `anonymous`, a key's key_id, a signed-in user's `user:<sub>`. */
export function callerOf(access: Access, settings: Pick<PolicySettings, 'groupsClaim' | 'claims'>): PolicyCaller {
  const groups = new Set<string>();
  const metaGroups = access.key?.metadata?.groups;
  for (const group of stringsOf(metaGroups)) groups.add(group);
  const claims: Record<string, string[]> = {};
  if (access.signedIn && access.claims) {
    for (const group of stringsOf(access.claims[settings.groupsClaim])) groups.add(group);
    for (const name of settings.claims) {
      const values = stringsOf(access.claims[name]);
      if (access.claims[name] !== undefined) claims[name] = values;
    }
  }
  const id = access.kind !== 'key' ? access.kind : access.signedIn ? access.subject! : access.key!.keyId;
  const caller: PolicyCaller = { id, kind: access.signedIn ? 'user' : access.kind, groups: [...groups].slice(0, MAX_GROUPS), claims };
  if (access.key?.alias !== undefined && !access.signedIn) caller.keyAlias = access.key.alias;
  return caller;
}

function stringsOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.slice(0, MAX_GROUPS).filter((item): item is string => typeof item === 'string');
  return [];
}

function targetEntity(action: PolicyAction, target: PolicyTarget): cedar.EntityJson {
  const uid = { type: RESOURCE_TYPE[action], id: target.id };
  if (action !== 'call_tool') {
    return { uid, attrs: { name: target.name, server: target.server, readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false }, parents: [] };
  }
  const hints = target.annotations ?? {};
  return {
    uid,
    attrs: {
      name: target.name,
      server: target.server,
      // The MCP spec's defaults where the tool says nothing; destructiveHint means something only for a tool that is
      // not read-only, so a read-only tool is never destructive.
      readOnlyHint: hints.readOnlyHint ?? false,
      destructiveHint: hints.readOnlyHint === true ? false : (hints.destructiveHint ?? true),
      idempotentHint: hints.idempotentHint ?? false,
      openWorldHint: hints.openWorldHint ?? true,
    },
    parents: [],
  };
}
