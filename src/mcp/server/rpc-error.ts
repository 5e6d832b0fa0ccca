import { McpError } from '@modelcontextprotocol/sdk/types.js';

/**
 * A JSON-RPC error whose wire message is the bare message. The SDK puts `MCP error <code>: ` into McpError's message and
 * sends that message as it is; the receiving SDK client adds the prefix again, so clients read
 * "MCP error -32602: MCP error -32602: unknown tool". With the bare message they read the prefix once.
 */
export class RpcError extends McpError {
  constructor(code: number, message: string, data?: unknown) {
    super(code, message, data);
    this.message = message;
  }
}
