import type { ErrorRequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { Tool } from '../../catalog/types.js';
import type { TokenFace } from '../../telemetry/token-accounting.js';
import type { ConversationShape } from './answers.js';
import type { UpstreamRoute, UpstreamSettings } from './proxy.js';
import type { ConversationStep } from './feedback-capture.js';
import type { SearchAnswer, SearchToolRenderer, SearchTurn, SearchTurnReader } from './search-tool.js';
import type { Api, RequestTool, ToolRequest } from './tool-request.js';

/**
 * One LLM API the chat face speaks (chat completions, the Responses API, Anthropic Messages): everything that differs
 * between them, behind one interface. The core (rewriting, search rounds, sticky selection, feedback capture) works
 * on ToolRequests and calls these; src/chat/routes.ts mounts one route per dialect (DIALECTS).
 */
export interface Dialect extends SearchToolRenderer {
  readonly api: Api;
  /** The route the proxy answers (`/v1/chat/completions`...). */
  readonly path: string;
  /**
   * A route that has the upstream count a request's tokens as it would be sent (the same rewrite and search tool,
   * without the search round): Anthropic's `/v1/messages/count_tokens`.
   */
  readonly countTokensPath?: string;
  /**
   * Where its requests go: which upstream setting (upstreamLlmUrl, OpenAI-compatible, or upstreamAnthropicUrl), the
   * route under that base URL, and how the configured upstream key is sent.
   */
  readonly upstream: { readonly setting: 'openai' | 'anthropic'; readonly route: UpstreamRoute; readonly keyHeader: UpstreamSettings['keyHeader'] };
  /** How messages name a request of this API (`chat completion request`). */
  readonly requestName: string;
  /** The token counters' face label. */
  readonly tokenFace: TokenFace;

  /** Validates a parsed body and reads what the rewriter needs; a bad body throws an invalid_request ToolrouterError. */
  parse(body: unknown): ToolRequest;
  /** A catalog (MCP) tool in this API's tool format (catalog mode). */
  renderTool(tool: Tool): object;

  /** The proxy's search tool in this API's format (src/chat/core/search-tool.ts gives description and parameters). */
  searchTool(name: string, description: string, parameters: Record<string, unknown>): Record<string, unknown>;
  /** Reads an upstream answer (JSON or SSE) for a call of the search tool `name`; undefined for one it cannot read. */
  searchTurnReader(name: string, answer: globalThis.Response): SearchTurnReader | undefined;
  /** The request body for the next upstream call: the search turn and its answers appended to the conversation. */
  continuation(body: Record<string, unknown>, turn: SearchTurn, answers: ReadonlyMap<string, SearchAnswer>): Record<string, unknown>;

  /** What identifies a turn's answer, in the reply and in a later history (sticky selection). */
  readonly answers: ConversationShape;
  /** The conversation as the chat feedback capture reads it. */
  conversationSteps(request: ToolRequest): ConversationStep[];

  /** Provider-native tool search (deferred loading); absent where the API has none (chat completions). */
  readonly native?: NativeSearch;

  /** Sends any error in this API's error shape. */
  sendError(res: Response, error: unknown): void;
  /** The Express error handler of this API's routes. */
  errorHandler(log: Logger): ErrorRequestHandler;
}

/** How an API loads deferred tools (src/chat/core/native.ts). */
export interface NativeSearch {
  /** Whether native mode can apply to this request at all. */
  applies(request: ToolRequest): boolean;
  /** The search tool's name in native mode, when the API has its own (OpenAI's client-executed `tool_search`). */
  readonly searchToolName?: string;
  /** The answer of a native search call that found `tools`: what the provider loads their deferred definitions from. */
  answer(tools: readonly RequestTool[]): SearchAnswer;
}
