import type { Request } from 'express';
import { invalidRequest } from './errors.js';
import type { ChatSettings } from '../settings.js';
import type { Dialect } from './dialect.js';
import type { ToolRequest } from './tool-request.js';

/**
 * Native mode: instead of removing the tools routing does not keep, the proxy forwards them deferred
 * (`defer_loading: true`) and lets the provider load what its search finds — Anthropic from `tool_reference` blocks,
 * OpenAI's Responses API from a client-executed `tool_search`'s output (src/chat/core/search-rounds.ts answers both, in
 * the dialect's way: Dialect.native).
 */

/**
 * The kept tools first, as the rewrite ordered them, then every other tool of the request, in its order, with
 * `defer_loading: true`. Deferred definitions stay out of the model's context
 * (and its cached prefix) until the search tool's answer references them.
 */
export function deferredBody(request: ToolRequest, body: Record<string, unknown>): Record<string, unknown> {
  const kept = (body.tools as Record<string, unknown>[] | undefined) ?? [];
  // Anthropic's and Responses' function tools both carry their name at the top level.
  const keptNames = new Set(kept.map((tool) => tool.name));
  const deferred = request.tools.filter((tool) => tool.function && !keptNames.has(tool.function.name)).map((tool) => ({ ...tool.definition, defer_loading: true }));
  return { ...body, tools: [...kept, ...deferred] };
}

/**
 * Whether this request uses native mode: `x-toolrouter-native` (`on`, `off`, `auto`) or chat.native; `auto` only for
 * models listed in chat.nativeModels. Only where the dialect has native search and says it applies (Anthropic's
 * Messages API; the Responses API unless the request brings its own `tool_search` tool); chat completions have none.
 */
export function nativeMode(
  header: NativeHeader | undefined,
  dialect: Pick<Dialect, 'native'>,
  request: ToolRequest,
  settings: Pick<ChatSettings, 'native' | 'nativeModels'>,
): boolean {
  if (!dialect.native?.applies(request)) return false;
  const mode = header ?? settings.native;
  if (mode !== 'auto') return mode === 'on';
  const model = typeof request.body.model === 'string' ? request.body.model : '';
  return settings.nativeModels.some((prefix) => model.startsWith(prefix));
}

export type NativeHeader = 'on' | 'off' | 'auto';

/** `x-toolrouter-native`, checked on every request (not only those native mode would apply to). */
export function readNativeHeader(req: Request): NativeHeader | undefined {
  const header = req.get('x-toolrouter-native')?.trim().toLowerCase();
  if (header !== undefined && !['on', 'off', 'auto'].includes(header)) {
    throw invalidRequest(`Header x-toolrouter-native must be on, off or auto, got "${header}".`, 'x-toolrouter-native', 'invalid_header');
  }
  return header as NativeHeader | undefined;
}
