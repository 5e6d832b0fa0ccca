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
  /** Per caller view: per action and tool, what holds whatever the context (visibility, and a fixed decision). */
  private readonly views = new Map<string, View>();

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
    for (const bound of ['broad', 'narrow'] as const) {
      const view = cedar.preparsePolicySet(`${id}-${bound}`, { staticPolicies: contextFree(compiled.policies, bound) });
      if (view.type === 'failure') throw new Error(`cannot prepare the context-free policies: ${view.errors.map((error) => error.message).join('; ')}`);
    }
    this.compiled = compiled;
    this.setId = id;
    this.views.clear();
  }

  decide(question: PolicyQuestion): PolicyDecision {
    const base = { enforced: this.settings.mode === 'enforce', confirmWithoutElicitation: this.settings.confirmWithoutElicitation };
    const compiled = this.compiled;
    if (!compiled) return { allowed: true, policies: [], ...base };
    // Most calls are decided by policies that do not read the context: then the answer is known per caller view and
    // tool, and Cedar is not asked again.
    const fixed = this.fixed(question.access, question.target, question.action);
    if (fixed) return this.decision(fixed.allowed, fixed.policies, base);
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
    return this.decision(decision === 'allow', diagnostics.reason, base);
  }

  private decision(allowed: boolean, policies: string[], base: Pick<PolicyDecision, 'enforced' | 'confirmWithoutElicitation'>): PolicyDecision {
    if (!allowed) return { allowed: false, policies, ...base };
    for (const policy of policies) {
      const question = this.compiled?.annotations[policy]?.confirm;
      if (question !== undefined) return { allowed: true, policies, confirm: { question, policy }, ...base };
    }
    return { allowed: true, policies, ...base };
  }

  mayPermit(access: Access, target: PolicyTarget, action: PolicyAction = 'call_tool'): boolean {
    if (!this.compiled) return true;
    return this.bounds(access, target, action).may;
  }

  /** What holds for this caller, action and tool whatever the context; worked out once per policy set and view. */
  private bounds(access: Access, target: PolicyTarget, action: PolicyAction): Bounds {
    const key = this.viewKey(access);
    let view = this.views.get(key);
    if (!view) {
      if (this.views.size >= MAX_VIEWS) this.views.delete(this.views.keys().next().value!);
      view = { byTarget: new WeakMap(), byKey: new Map() };
      this.views.set(key, view);
    }
    // The same target object (the gateway keeps one per catalog entry) is found without building a key.
    const known = action === 'call_tool' ? view.byTarget.get(target) : undefined;
    if (known) return known;
    // The tool's attributes are part of the key: an upstream that changes a tool's hints gets a fresh answer.
    const hints = target.annotations;
    const memo = `${action}\u0000${target.id}\u0000${target.server}\u0000${target.name}\u0000${hints?.readOnlyHint}${hints?.destructiveHint}${hints?.idempotentHint}${hints?.openWorldHint}`;
    let bounds = view.byKey.get(memo);
    if (bounds === undefined) {
      bounds = this.contextFreeBounds(access, target, action);
      if (view.byKey.size >= MAX_ANSWERS_PER_VIEW) view.byKey.clear();
      view.byKey.set(memo, bounds);
    }
    if (action === 'call_tool') view.byTarget.set(target, bounds);
    return bounds;
  }

  viewKey(access: Access): string {
    return this.compiled ? `${this.compiled.version}\u0000${this.principalOf(access).key}` : '';
  }

  callerOf(access: Access): PolicyCaller {
    return this.principalOf(access).caller;
  }

  /**
   * Asks the two context-free sets (visibility.ts). `broad` (permits as easy, forbids as hard as any context makes
   * them) denies only when no context could permit: the tool is then hidden. `narrow` (the reverse) allows only when
   * every context permits. When both agree on the decision and the deciding policies, the context cannot change
   * either: the decision is fixed for this view and tool.
   */
  private contextFreeBounds(access: Access, target: PolicyTarget, action: PolicyAction): Bounds {
    const broad = this.askContextFree('broad', access, target, action);
    if (broad.type === 'failure') return { may: true, fixed: null };
    return { may: broad.response.decision === 'allow', broad: broad.response };
  }

  /** The decision when no context can change it (worked out on the first call of this tool by this view), else null. */
  private fixed(access: Access, target: PolicyTarget, action: PolicyAction): { allowed: boolean; policies: string[] } | null {
    const bounds = this.bounds(access, target, action);
    if (bounds.fixed !== undefined) return bounds.fixed;
    const broad = bounds.broad;
    const narrow = this.askContextFree('narrow', access, target, action);
    const same =
      broad !== undefined &&
      narrow.type === 'success' &&
      broad.decision === narrow.response.decision &&
      broad.diagnostics.errors.length === 0 &&
      narrow.response.diagnostics.errors.length === 0 &&
      sameSet(broad.diagnostics.reason, narrow.response.diagnostics.reason);
    bounds.fixed = same ? { allowed: bounds.may, policies: narrow.response.diagnostics.reason } : null;
    return bounds.fixed;
  }

  private askContextFree(bound: 'broad' | 'narrow', access: Access, target: PolicyTarget, action: PolicyAction): cedar.AuthorizationAnswer {
    const { principal, entities } = this.principalOf(access);
    return cedar.statefulIsAuthorized({
      principal,
      action: { type: 'Action', id: action },
      resource: { type: RESOURCE_TYPE[action], id: target.id },
      context: { arguments: {}, surface: '' },
      preparsedPolicySetId: `${this.setId}-${bound}`,
      entities: [...entities, targetEntity(action, target)],
    });
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

/** One caller view's answers: by target object (no key to build on the hot path), else by the target's attributes. */
interface View {
  byTarget: WeakMap<PolicyTarget, Bounds>;
  byKey: Map<string, Bounds>;
}

/** What a caller view knows of one tool whatever the context. */
interface Bounds {
  /** Some context could permit the call (search and listings show the tool). */
  may: boolean;
  /** The broad set's answer, kept to compare with the narrow one's. */
  broad?: cedar.Response;
  /** The decision and its policies when no context can change them; null: the context can; undefined: not asked yet. */
  fixed?: { allowed: boolean; policies: string[] } | null;
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const seen = new Set(a);
  return b.every((item) => seen.has(item));
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
