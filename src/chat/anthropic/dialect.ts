import type { Dialect } from '../core/dialect.js';
import { anthropicShape } from './answers.js';
import { anthropicErrorHandler, sendAnthropicError } from './errors.js';
import { anthropicSteps, parseAnthropicRequest } from './request.js';
import { anthropicContinuation, anthropicSearchTool, anthropicSearchTurnReader } from './search-turn.js';
import { anthropicTool } from './tools.js';

/**
 * Anthropic's Messages API (`POST /v1/messages`, and `/v1/messages/count_tokens`), with errors in Anthropic's shape.
 * Native mode: the search tool's answer is `tool_reference` blocks, which the provider expands into the deferred tools.
 */
export const anthropicDialect: Dialect = {
  api: 'anthropic',
  path: '/v1/messages',
  countTokensPath: '/v1/messages/count_tokens',
  upstream: { setting: 'anthropic', route: 'whole-path', keyHeader: 'x-api-key' },
  requestName: 'Messages API request',
  tokenFace: 'messages',
  parse: parseAnthropicRequest,
  renderTool: anthropicTool,
  searchTool: anthropicSearchTool,
  searchTurnReader: anthropicSearchTurnReader,
  continuation: anthropicContinuation,
  answers: anthropicShape,
  conversationSteps: anthropicSteps,
  native: {
    applies: () => true,
    answer: (tools) => tools.map((tool) => ({ type: 'tool_reference', tool_name: tool.function!.name })),
  },
  sendError: sendAnthropicError,
  errorHandler: anthropicErrorHandler,
};
