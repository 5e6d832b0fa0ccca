import type { Dialect } from '../core/dialect.js';
import { openAiErrorHandler, sendOpenAiError } from '../openai/errors.js';
import { responsesFunctionTool } from '../openai/tools.js';
import { responsesShape } from './answers.js';
import { parseResponsesRequest, responsesSteps } from './request.js';
import { CLIENT_TOOL_SEARCH, responsesContinuation, responsesSearchTool, responsesSearchTurnReader } from './search-turn.js';

/**
 * OpenAI's Responses API (`POST /v1/responses`). Native mode: the deferred tools load from a client-executed
 * `tool_search`'s output, unless the request brings its own `tool_search` tool (one per request).
 */
export const responsesDialect: Dialect = {
  api: 'responses',
  path: '/v1/responses',
  upstream: { setting: 'openai', route: { endpoint: 'responses' }, keyHeader: 'authorization' },
  requestName: 'Responses API request',
  tokenFace: 'responses',
  parse: parseResponsesRequest,
  renderTool: responsesFunctionTool,
  searchTool: responsesSearchTool,
  searchTurnReader: responsesSearchTurnReader,
  continuation: responsesContinuation,
  answers: responsesShape,
  conversationSteps: responsesSteps,
  native: {
    applies: (request) => !request.tools.some((tool) => tool.definition.type === 'tool_search'),
    searchToolName: CLIENT_TOOL_SEARCH,
    answer: (tools) => tools.map((tool) => tool.definition),
  },
  sendError: sendOpenAiError,
  errorHandler: openAiErrorHandler,
};
