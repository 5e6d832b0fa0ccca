import type { Client } from '@modelcontextprotocol/client';

/** Connects (revision probe, then initialize) within one deadline of `ms` for the whole. */
export async function connectWithin(client: Client, transport: Parameters<Client['connect']>[0], ms: number): Promise<void> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error(`connecting timed out after ${ms} ms (mcp.connectTimeoutMs)`)), ms);
  try {
    await client.connect(transport, { timeout: ms, signal: deadline.signal });
  } catch (error) {
    // The SDK words an aborted request as "Error: <reason>"; the deadline's own error reads better in the status.
    throw deadline.signal.aborted ? deadline.signal.reason : error;
  } finally {
    clearTimeout(timer);
  }
}

