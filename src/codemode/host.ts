/**
 * What code running in the sandbox can reach: exactly two operations, both answered by the face that runs the code
 * (the MCP face implements it over McpGateway with the caller's Access, so code reaches nothing its caller could not).
 * This module knows nothing of MCP.
 */

/** How much of each tool `search` answers with: a TypeScript signature (code), a short form (brief), or everything (full). */
export type SearchDetail = 'code' | 'brief' | 'full';

export interface SearchOptions {
  top_k?: number;
  detail?: SearchDetail;
}

export interface ToolHost {
  /**
   * Runs a tool and answers with its value (structured content, or its text). Rejects with a ToolCallFailure when the
   * tool reported an error or could not be called; the code sees that as an exception it may catch.
   */
  call(name: string, args: Record<string, unknown>): Promise<unknown>;
  /** The same ranking as search_tools, as the caller may see it. */
  search(query: string, options: SearchOptions): Promise<unknown>;
}

/** A failed call as code sees it: `error.message`, `error.code`, and for a tool's own error result, `error.result`. */
export class ToolCallFailure extends Error {
  override readonly name = 'ToolCallFailure';
  constructor(
    message: string,
    /** `tool_error` for a result with isError; else the gateway's code (forbidden, unknown_tool, upstream_timeout, ...). */
    readonly code: string,
    readonly result?: unknown,
  ) {
    super(message);
  }
}
