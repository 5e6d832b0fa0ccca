import * as cedar from '@cedar-policy/cedar-wasm/nodejs';

/**
 * The policy sets search and listings ask (is there any call of this tool this caller could make?), and that fix a
 * decision no context can change, made from the real one by taking the context out: in each policy's conditions, every part that reads `context` is replaced by the
 * constant that makes a permit as permissive and a forbid as narrow as any context could (`broad`), or the reverse
 * (`narrow`). The result answers with
 * statefulIsAuthorized (prepared once, a fraction of a millisecond per tool) instead of a partial evaluation that
 * parses the whole set again for every tool.
 *
 * Sound: a tool some context permits is always visible (a permit only gets easier to satisfy, a forbid only harder).
 * Exact for conditions that are conjunctions and disjunctions of parts that do or do not read the context, which is
 * how policies are written; a part mixing both inside one comparison counts as "could be either".
 */
export function contextFree(policies: Record<string, string>, bound: 'broad' | 'narrow' = 'broad'): Record<string, cedar.PolicyJson> {
  const out: Record<string, cedar.PolicyJson> = {};
  for (const [id, text] of Object.entries(policies)) {
    const json = cedar.policyToJson(text);
    if (json.type === 'failure') throw new Error(`policy ${id}: ${json.errors.map((error) => error.message).join('; ')}`);
    const policy = json.json;
    // broad: permits as easy to satisfy as any context makes them, forbids only what holds whatever the context.
    // narrow: the reverse (a permit only where every context satisfies it, a forbid wherever some context could).
    const wantTrue = (policy.effect === 'permit') === (bound === 'broad');
    out[id] = {
      ...policy,
      conditions: policy.conditions.map((clause) => ({
        kind: clause.kind,
        // A `when` must be true for the policy to apply, an `unless` false.
        body: abstract(clause.body, clause.kind === 'when' ? wantTrue : !wantTrue),
      })),
    };
  }
  return out;
}

/** `expr` with every context-reading boolean part replaced by `lean` (the value that helps the policy's aim). */
function abstract(expr: cedar.Expr, lean: boolean): cedar.Expr {
  const node = expr as Record<string, unknown>;
  if ('&&' in node || '||' in node) {
    const op = '&&' in node ? '&&' : '||';
    const { left, right } = node[op] as { left: cedar.Expr; right: cedar.Expr };
    return { [op]: { left: abstract(left, lean), right: abstract(right, lean) } } as cedar.Expr;
  }
  if ('!' in node) return { '!': { arg: abstract((node['!'] as { arg: cedar.Expr }).arg, !lean) } } as cedar.Expr;
  return readsContext(expr) ? ({ Value: lean } as cedar.Expr) : expr;
}

function readsContext(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(readsContext);
  if (typeof value !== 'object' || value === null) return false;
  const node = value as Record<string, unknown>;
  if (node.Var === 'context') return true;
  return Object.values(node).some(readsContext);
}
