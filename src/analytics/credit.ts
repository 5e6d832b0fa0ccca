import type { FeedbackInput, FeedbackRecorder } from '../feedback/service.js';
import type { FeedbackEvent } from '../feedback/types.js';
import type { SearchLog } from './log.js';
import { hashedQuery, isHashedQuery } from './types.js';

/**
 * The recorder the MCP and chat faces credit calls to (src/mcp/gateway/feedback-capture.ts,
 * src/chat/core/feedback-capture.ts): every credit the faces make is also the search log's "the tool then called", so
 * the log pairs searches and calls exactly as feedback does, with no pairing of its own. With feedback off the faces
 * still pair (for the log), and nothing is learnt: the event returned is not stored anywhere. Under
 * `analytics.queries: hash | off` the faces keep only a query's hash while they wait for its call (`storedQuery`), so
 * those credits reach the log and teach feedback nothing.
 */
export function creditingRecorder(log: SearchLog, feedback: FeedbackRecorder | undefined): FeedbackRecorder {
  return {
    record(input: FeedbackInput): Promise<FeedbackEvent> {
      if (input.relevant) log.credited({ query: input.query, tool: input.tool, scope: input.scope });
      // A query kept only as its hash (storedQuery) pairs in the log; there are no words to learn from.
      if (feedback && !isHashedQuery(input.query)) return feedback.record(input);
      return Promise.resolve({ id: '', query: input.query, embedding: new Float32Array(0), model: '', tool: input.tool, relevant: input.relevant, time: Date.now(), scope: input.scope ?? '' });
    },
    storedQuery: (query) => (log.settings.queries === 'full' ? query : hashedQuery(query)),
  };
}
