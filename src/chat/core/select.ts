import type { RequestTool, ToolRequest } from './tool-request.js';

/**
 * The decision of a rewrite, as pure functions: which of a request's tools stay, and why. Ranking happens elsewhere;
 * these functions get its result.
 */

/** Why a tool must stay whatever the ranking says, strongest first (a tool gets the first that applies). */
export type RuleReason = 'tool_choice' | 'tool_result' | 'called' | 'pinned';
/**
 * - `sticky`: forwarded in an earlier turn of the same conversation; selection is append-only within a conversation,
 *   so the tools block stays a stable prefix (providers' prompt caching) and the model keeps what it was shown.
 * - `ranked`: among the top k for the conversation.
 * - `found`: the model asked for it through the proxy's search tool.
 * - `within_k`: the request has no more tools than k (or would lose none), so it is forwarded unchanged.
 * - `below_threshold`: the tool list is small enough to show whole (search.activation), so it is not trimmed.
 * - `no_query`: the conversation has no text to rank with; forwarded unchanged rather than guessing.
 * - `no_match`: nothing in the tool list matched the query at all; forwarded unchanged rather than guessing.
 * - `search_unavailable`: ranking failed (an index not ready, the embeddings provider down); with chat.failOpen the
 *   request goes on with its tools rather than failing.
 * - `not_a_function`: a non-function tool (`custom`, hosted tools like web_search, provider extensions), which
 *   toolrouter does not rank.
 */
export type KeepReason = RuleReason | 'sticky' | 'ranked' | 'found' | 'within_k' | 'below_threshold' | 'no_query' | 'no_match' | 'search_unavailable' | 'not_a_function';
/** Why a whole request is forwarded unchanged. */
export type UnchangedReason = 'within_k' | 'below_threshold' | 'no_query' | 'no_match' | 'search_unavailable';
/**
 * `below_top_k`: ranked below the top k. `replaced_by_catalog`: catalog mode replaced the request's tools.
 * `over_max_tools`: kept by some reason, but the list was over chat.maxTools (a provider limit) and this tool's reason
 * was among the weakest.
 */
export type DropReason = 'below_top_k' | 'replaced_by_catalog' | 'over_max_tools';

export interface KeptTool {
  name: string;
  reason: KeepReason;
  /** Fused search score, for ranked tools. */
  score?: number;
  /** Where the forwarded definition came from: the request, or the router's catalog (catalog mode). */
  source: 'request' | 'catalog';
}

export interface DroppedTool {
  name: string;
  reason: DropReason;
}

/**
 * Tools the model must still see, by name:
 * - `tool_choice`: named by `tool_choice` (a forced function, or the `allowed_tools` list); dropping it would make
 *   the upstream reject the request.
 * - `tool_result`: its result is in the conversation (chat: `tool`/`function` messages; responses:
 *   `function_call_output` items). The model reads a result against its tool's definition.
 * - `called`: the model called it earlier (chat: `tool_calls`, legacy `function_call`; responses: `function_call`
 *   items); the conversation refers to it.
 * - `pinned`: configured to be always visible (`search.pinned`).
 */
export function requiredTools(request: Pick<ToolRequest, 'toolUse' | 'toolChoiceNames'>, pinned: readonly string[]): Map<string, RuleReason> {
  const required = new Map<string, RuleReason>();
  const add = (name: string | undefined, reason: RuleReason) => {
    if (name !== undefined && !required.has(name)) required.set(name, reason);
  };
  for (const name of request.toolChoiceNames) add(name, 'tool_choice');
  for (const name of request.toolUse.results) add(name, 'tool_result');
  for (const name of request.toolUse.called) add(name, 'called');
  for (const name of pinned) add(name, 'pinned');
  return required;
}

/**
 * A label for any request tool: the function name; for other kinds their own name where they have one (chat's
 * `custom.name`, responses' top-level `name`, an `mcp` tool's `server_label`), else their type.
 */
export function toolLabel(tool: RequestTool): string {
  if (tool.function) return tool.function.name;
  const { definition } = tool;
  const type = String(definition.type);
  const nested = (definition[type] as { name?: unknown } | undefined)?.name;
  for (const name of [nested, definition.name, definition.server_label]) if (typeof name === 'string') return name;
  return type;
}

/** Every tool kept: rule-kept ones with their rule, the others with `reason`. */
export function keepAll(
  tools: readonly RequestTool[],
  required: ReadonlyMap<string, RuleReason>,
  reason: UnchangedReason,
): KeptTool[] {
  return tools.map((tool) => ({
    name: toolLabel(tool),
    reason: !tool.function ? 'not_a_function' : (required.get(tool.function.name) ?? reason),
    source: 'request',
  }));
}

/**
 * Request mode: rule-kept tools stay and do not take a ranking slot; the top-k ranked of the others stay (`ranked`
 * holds only those, best first); everything else is dropped. Kept tools keep the request's order, so consecutive
 * turns that keep the same tools send the same prefix (upstream prompt caching).
 */
export function selectRequestTools(
  tools: readonly RequestTool[],
  required: ReadonlyMap<string, RuleReason>,
  ranked: readonly { name: string; score: number }[],
  sticky: ReadonlySet<string> = new Set(),
): { keep: boolean[]; kept: KeptTool[]; dropped: DroppedTool[] } {
  const scores = new Map(ranked.map((hit) => [hit.name, hit.score]));
  const keep: boolean[] = [];
  const kept: KeptTool[] = [];
  const dropped: DroppedTool[] = [];
  for (const tool of tools) {
    const name = toolLabel(tool);
    const rule = tool.function ? required.get(name) : undefined;
    const score = tool.function ? scores.get(name) : undefined;
    if (!tool.function) kept.push({ name, reason: 'not_a_function', source: 'request' });
    else if (rule) kept.push({ name, reason: rule, source: 'request' });
    else if (sticky.has(name)) kept.push({ name, reason: 'sticky', source: 'request' });
    else if (score !== undefined) kept.push({ name, reason: 'ranked', score, source: 'request' });
    else {
      dropped.push({ name, reason: 'below_top_k' });
      keep.push(false);
      continue;
    }
    keep.push(true);
  }
  return { keep, kept, dropped };
}

/**
 * Strongest first: what cap() drops last. Tools named by tool_choice or read in results must stay for the upstream to
 * accept the request at all; non-function (hosted) tools cannot be asked for again through search; sticky ones were
 * already shown; ranked and found ones go by score.
 */
const STRENGTH: readonly KeepReason[] = [
  'tool_choice',
  'tool_result',
  'called',
  'not_a_function',
  'pinned',
  'sticky',
  'found',
  'ranked',
  'within_k',
  'below_threshold',
  'no_query',
  'no_match',
  'search_unavailable',
];

/**
 * At most `max` of `kept` (in their order), the weakest reasons dropped first, lower scores before higher ones, later
 * tools before earlier ones. Returns the positions kept.
 */
export function capKept(kept: readonly KeptTool[], max: number): { keep: boolean[]; dropped: DroppedTool[] } {
  const keep = kept.map(() => true);
  if (kept.length <= max) return { keep, dropped: [] };
  const order = kept
    .map((tool, position) => ({ tool, position }))
    .sort(
      (a, b) =>
        STRENGTH.indexOf(a.tool.reason) - STRENGTH.indexOf(b.tool.reason) ||
        (b.tool.score ?? 0) - (a.tool.score ?? 0) ||
        a.position - b.position,
    );
  const dropped: DroppedTool[] = [];
  for (const { tool, position } of order.slice(Math.max(0, max))) {
    keep[position] = false;
    dropped.push({ name: tool.name, reason: 'over_max_tools' });
  }
  return { keep, dropped };
}

/**
 * Sticky selection: the tools of an earlier turn first, in the order they were forwarded then, and every other kept
 * tool after them in request order, so the forwarded list only grows at its end.
 */
export function stickyOrder<T extends object>(items: readonly T[], nameOf: (item: T) => string, sticky: readonly string[]): T[] {
  const byName = new Map(items.map((item) => [nameOf(item), item]));
  const first = sticky.flatMap((name) => {
    const item = byName.get(name);
    return item === undefined ? [] : [item];
  });
  const placed = new Set(first);
  return [...first, ...items.filter((item) => !placed.has(item))];
}
