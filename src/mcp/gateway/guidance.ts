/** What the gateway says when it has nothing to offer; the same words on stderr (`toolrouter stdio`) and in search_tools. */
export const NO_SERVERS =
  'toolrouter has no upstream MCP servers, so there are no tools to search or call. Add servers with --mcp-config FILE ' +
  '(your Claude Desktop, Claude Code .mcp.json, Cursor or VS Code MCP config) or under mcp.servers in the toolrouter config file.';

/** The index is being built: said without naming an HTTP endpoint, since stdio has none. */
export const INDEX_BUILDING = 'the search index is still being built with the servers\' tools; retry in a few seconds';
