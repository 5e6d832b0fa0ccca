/**
 * What a search tool covers, said in its own description: agents skip a search tool that does not say what is behind
 * it. One line per server (a one-line summary and its tool count), bounded in tokens; past the bound, servers are
 * named with their counts only, and past that the rest are counted.
 */
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import type { Tool } from '../catalog/types.js';

export interface CoveredServer {
  name: string;
  tools: number;
  description?: string;
}

/** Default bound on the coverage text (o200k_base tokens). */
export const COVERAGE_TOKENS = 400;
/** Longest one-line summary (characters). */
const SUMMARY_CHARS = 90;

/** The first sentence (or line) of a description, cut to a line. */
export function oneLine(text: string | undefined, limit = SUMMARY_CHARS): string {
  const first = (text ?? '').replace(/\s+/g, ' ').trim().split(/(?<=[.!?。])\s/u)[0] ?? '';
  return first.length <= limit ? first : `${first.slice(0, limit - 1).trimEnd()}…`;
}

/**
 * The servers a caller may search, as text for a tool description or MCP instructions, at most `budget` tokens: each
 * with its summary while that fits; else names and counts; else as many names as fit and "N more".
 */
export function describeCoverage(servers: readonly CoveredServer[], budget = COVERAGE_TOKENS): string {
  if (servers.length === 0) return '';
  const total = servers.reduce((sum, server) => sum + server.tools, 0);
  const head = `Searches ${total} tools of ${servers.length} server${servers.length === 1 ? '' : 's'}:`;
  const line = (server: CoveredServer) => {
    const summary = oneLine(server.description);
    return summary === '' ? `- ${server.name} (${server.tools})` : `- ${server.name} (${server.tools}): ${summary}`;
  };
  const full = [head, ...servers.map(line)].join('\n');
  if (encode(full).length <= budget) return full;
  const names = servers.map((server) => `${server.name} (${server.tools})`);
  const grouped = `${head} ${names.join(', ')}.`;
  if (encode(grouped).length <= budget) return grouped;
  // Largest servers first: they hold most of what a search can find.
  const bySize = [...servers].sort((a, b) => b.tools - a.tools);
  let shown = bySize.length;
  const render = (count: number) =>
    `${head} ${bySize
      .slice(0, count)
      .map((server) => `${server.name} (${server.tools})`)
      .join(', ')}, and ${bySize.length - count} more.`;
  // Halve then walk: at most ~log n + a few encodes, never one per server.
  while (shown > 1 && encode(render(shown)).length > budget) shown = Math.max(1, Math.floor(shown / 2));
  while (shown + 1 < bySize.length && encode(render(shown + 1)).length <= budget) shown++;
  return render(shown);
}

/** Tools grouped by server, for a list of tools without a catalog (the chat proxy's request): by name prefix. */
export function serversOfTools(tools: readonly Pick<Tool, 'name'>[], separator: string): CoveredServer[] {
  const counts = new Map<string, number>();
  for (const tool of tools) {
    const cut = separator === '' ? -1 : tool.name.indexOf(separator);
    const server = cut > 0 ? tool.name.slice(0, cut) : '(no server)';
    counts.set(server, (counts.get(server) ?? 0) + 1);
  }
  return [...counts].map(([name, count]) => ({ name, tools: count }));
}

/** A tool's brief form: name, one-line description, required parameters with their types. */
export interface BriefTool {
  name: string;
  description: string;
  required: Record<string, string>;
}

export function briefTool(tool: Tool): BriefTool {
  const required: Record<string, string> = {};
  for (const name of tool.inputSchema.required ?? []) {
    const type = tool.inputSchema.properties?.[name]?.type;
    required[name] = Array.isArray(type) ? type.join('|') : (type ?? 'any');
  }
  return { name: tool.name, description: oneLine(tool.description, 160), required };
}
