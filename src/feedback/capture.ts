import type { Logger } from 'pino';
import type { FeedbackRecorder } from './service.js';
import type { FeedbackSurface } from './types.js';

/**
 * Records that a search's result was used (a tool it returned was then called), without ever failing the caller: a
 * call or completion must never fail because its feedback could not be stored. The faces decide what pairs a search
 * with a call (src/chat/core/feedback-capture.ts, src/mcp/gateway/feedback-capture.ts); this is the one way they record it.
 */
export function recordUse(
  recorder: FeedbackRecorder,
  log: Logger | undefined,
  input: { query: string; tool: string; scope: string | undefined; surface: FeedbackSurface },
): void {
  recorder.record({ ...input, relevant: true }).catch((error: unknown) => log?.warn({ err: error, tool: input.tool }, 'feedback event not recorded'));
}
