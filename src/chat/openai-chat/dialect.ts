import type { Dialect } from '../core/dialect.js';
import { openAiErrorHandler, sendOpenAiError } from '../openai/errors.js';
import { openAiFunctionTool } from '../openai/tools.js';
import { chatShape } from './answers.js';
import { chatSteps, parseChatRequest } from './request.js';
import { chatContinuation, chatSearchTool, chatSearchTurnReader } from './search-turn.js';

/** OpenAI's chat completions (`POST /v1/chat/completions`), which have no deferred tool loading. */
export const chatDialect: Dialect = {
  api: 'chat',
  path: '/v1/chat/completions',
  upstream: { setting: 'openai', route: { endpoint: 'chat/completions' }, keyHeader: 'authorization' },
  requestName: 'chat completion request',
  tokenFace: 'chat',
  parse: parseChatRequest,
  renderTool: openAiFunctionTool,
  searchTool: chatSearchTool,
  searchTurnReader: chatSearchTurnReader,
  continuation: chatContinuation,
  answers: chatShape,
  conversationSteps: chatSteps,
  sendError: sendOpenAiError,
  errorHandler: openAiErrorHandler,
};
