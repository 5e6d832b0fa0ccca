/** An upstream's tools: listing them from the server, and mirroring them into the catalog under qualified names. */
import type { Client } from '@modelcontextprotocol/client';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { Catalog } from '../../catalog/catalog.js';
import type { Tool } from '../../catalog/types.js';
import { validateTools } from '../../catalog/validate.js';
import { applyTransform, type ToolTransform } from './transform.js';

/** Guards against an upstream whose cursors never end. */
const MAX_LIST_PAGES = 1_000;

/** Every page of tools/list, past the v2 client's result cache (a re-list after list_changed must see the list as it is). */
export async function listAllTools(client: Client, timeoutMs: number): Promise<McpTool[]> {
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  for (let page = 0; ; page++) {
    if (page >= MAX_LIST_PAGES) throw new Error(`tools/list did not end after ${MAX_LIST_PAGES} pages`);
    const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: timeoutMs, cacheMode: 'bypass' });
    // The v2 client's Tool type is its own; the JSON is the same.
    tools.push(...(result.tools as McpTool[]));
    if (!result.nextCursor || result.nextCursor === cursor) return tools;
    cursor = result.nextCursor;
  }
}

/**
 * One server's tools in the catalog (the source named after the server): which qualified name maps to which upstream
 * tool, the transforms applied, what was left out and why, and, while the server is down, the names it had.
 */
export class ToolListing {
  /** The server's tools as last listed, under their own names; kept to re-publish when a clash resolves. */
  private listed: McpTool[] = [];
  /** What the server is for, as last published with its tools (the catalog indexes it with them). */
  private description: string | undefined;
  /** Qualified name → the upstream's own tool name, for tools currently in the catalog. */
  private readonly toUpstream = new Map<string, string>();
  /** Qualified (transformed) name → the transform applied, for mapping call arguments back. */
  private readonly transformOf = new Map<string, ToolTransform>();
  /** Qualified names of tools the upstream runs only as tasks. */
  private asTasks = new Set<string>();
  /** Tools the upstream can run either way (execution.taskSupport "optional"). */
  private taskOptional = new Set<string>();
  /** Qualified names of the tools it had in the catalog when it went down; empty while connected. */
  private readonly remembered = new Set<string>();
  clashes: string[] = [];
  skipped: string[] = [];
  transformProblems: string[] = [];

  constructor(
    private readonly server: string,
    private readonly catalog: Catalog,
    private readonly separator: string,
    /** This server's transforms by qualified upstream name. */
    private readonly transforms: Map<string, ToolTransform>,
    private readonly log: Logger,
  ) {}

  get size(): number {
    return this.toUpstream.size;
  }

  get rememberedSize(): number {
    return this.remembered.size;
  }

  upstreamName(qualifiedName: string): string | undefined {
    return this.toUpstream.get(qualifiedName);
  }

  transform(qualifiedName: string): ToolTransform | undefined {
    return this.transformOf.get(qualifiedName);
  }

  /** Whether the upstream can run this tool as a task if asked (execution.taskSupport "optional"). */
  offersTask(qualifiedName: string): boolean {
    return this.taskOptional.has(qualifiedName);
  }

  /** Whether the upstream runs this tool only as a task (execution.taskSupport "required"). */
  requiresTask(qualifiedName: string): boolean {
    return this.asTasks.has(qualifiedName);
  }

  remembers(qualifiedName: string): boolean {
    return this.remembered.has(qualifiedName);
  }

  /** Puts the listed tools into the catalog under qualified names, leaving out invalid and clashing ones. */
  publish(tools: McpTool[], description = this.description): void {
    this.listed = tools;
    this.description = description;
    this.remembered.clear();
    const accepted: Tool[] = [];
    const mapping = new Map<string, string>();
    const clashes: string[] = [];
    const skipped: string[] = [];
    const transformProblems: string[] = [];
    const transformed = new Map<string, ToolTransform>();
    const matched = new Set<string>();
    const asTasks = new Set<string>();
    const optional = new Set<string>();
    // An empty separator turns namespacing off: tools keep the upstream's names, and equal names clash.
    const qualify = (name: string) => (this.separator === '' ? name : `${this.server}${this.separator}${name}`);
    for (let tool of tools) {
      // A tool that runs only as a task (MCP 2025-11-25) is offered as a plain tool: toolrouter runs it as a task on the
      // upstream and answers the call with its result (calls.ts callAsTask), so clients call it like any other.
      const needsTask = tool.execution?.taskSupport === 'required';
      if (needsTask) tool = withoutTaskSupport(tool);
      let qualified = qualify(tool.name);
      let candidate: McpTool | Tool = { ...tool, name: qualified };
      const transform = this.transforms.get(qualified);
      if (transform) {
        matched.add(qualified);
        if (transform.hidden) continue;
        const result = applyTransform(candidate, transform, transform.name === undefined ? qualified : qualify(transform.name));
        if ('problems' in result) {
          transformProblems.push(...result.problems.map((problem) => `${problem}; the tool is left out`));
          continue;
        }
        candidate = result.tool;
        qualified = candidate.name;
      }
      try {
        validateTools([candidate]);
      } catch (error) {
        skipped.push(`${tool.name}: ${(error as Error).message}`);
        continue;
      }
      const owner = this.catalog.get(qualified)?.source;
      if ((owner !== undefined && owner !== this.server) || mapping.has(qualified)) {
        clashes.push(`${qualified} (${owner !== undefined && owner !== this.server ? `owned by source "${owner}"` : 'listed twice'})`);
        continue;
      }
      accepted.push(candidate as Tool);
      mapping.set(qualified, tool.name);
      if (needsTask) asTasks.add(qualified);
      if (tool.execution?.taskSupport === 'optional') optional.add(qualified);
      if (transform) transformed.set(qualified, transform);
    }
    // With namespacing off, a key may belong to any server: only a namespaced key is known to be this server's.
    if (this.separator !== '') {
      for (const key of this.transforms.keys()) {
        if (!matched.has(key)) transformProblems.push(`tool "${key}": a transform is configured, but server "${this.server}" does not list this tool`);
      }
    }
    if (transformProblems.join() !== this.transformProblems.join() && transformProblems.length > 0) {
      this.log.warn({ transformProblems }, 'tool transforms do not fit the tools this upstream lists');
    }
    if (clashes.join() !== this.clashes.join() && clashes.length > 0) {
      this.log.warn({ clashes }, 'upstream tools clash with names another source owns; the first owner keeps them');
    }
    if (skipped.join() !== this.skipped.join() && skipped.length > 0) this.log.warn({ skipped }, 'upstream tools are not valid MCP tools; left out');
    this.catalog.setSource(this.server, accepted, this.server, this.description);
    this.toUpstream.clear();
    for (const [qualified, original] of mapping) this.toUpstream.set(qualified, original);
    this.transformOf.clear();
    for (const [qualified, transform] of transformed) this.transformOf.set(qualified, transform);
    this.asTasks = asTasks;
    this.taskOptional = optional;
    this.clashes = clashes;
    this.skipped = skipped;
    this.transformProblems = transformProblems;
  }

  /** Re-applies the last listing (after the owner of a clashing name went away); false when nothing clashed. */
  republish(): boolean {
    if (this.clashes.length === 0) return false;
    this.publish(this.listed);
    return true;
  }

  /**
   * The server is gone: its tools leave the catalog (listings, search and the index stop offering what cannot be
   * called, and another server may take over a clashing name) but their names stay remembered, so a call to one
   * answers upstream_unavailable naming this server.
   */
  withdraw(): void {
    for (const name of this.toUpstream.keys()) this.remembered.add(name);
    this.toUpstream.clear();
    this.transformOf.clear();
    this.asTasks = new Set();
    this.taskOptional = new Set();
    this.clashes = [];
    this.catalog.removeSource(this.server);
  }

  /** The server was removed: nothing of it stays. */
  clear(): void {
    this.withdraw();
    this.remembered.clear();
  }
}

/** The definition as toolrouter offers it: without `taskSupport` (through toolrouter the tool is called plainly). */
function withoutTaskSupport(tool: McpTool): McpTool {
  const { taskSupport: _taskSupport, ...execution } = tool.execution ?? {};
  const { execution: _execution, ...rest } = tool;
  return Object.keys(execution).length > 0 ? { ...rest, execution } : rest;
}
