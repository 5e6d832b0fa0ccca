import { NOT_RUN, SseReader, turnReader, type SearchAnswer, type SearchTurn, type SearchTurnReader } from '../core/search-tool.js';

/** Anthropic Messages' side of the proxy's search tool (src/chat/core/search-tool.ts): its shape, its turns, and what follows them. */

export function anthropicSearchTool(name: string, description: string, parameters: Record<string, unknown>): Record<string, unknown> {
  return { name, description, input_schema: parameters };
}

/** Reads a message (JSON or SSE events) for a call of the search tool. */
export function anthropicSearchTurnReader(name: string, answer: globalThis.Response): SearchTurnReader | undefined {
  return turnReader(answer, () => new AnthropicStreamReader(name), (json) => anthropicTurn(json, name));
}

/** The next request: every tool_use of the turn gets its tool_result, in one user message right after it (the API requires both). */
export function anthropicContinuation(body: Record<string, unknown>, turn: SearchTurn, answers: ReadonlyMap<string, SearchAnswer>): Record<string, unknown> {
  const results = turn.allCallIds.map((id) => ({ type: 'tool_result', tool_use_id: id, content: answers.get(id) ?? NOT_RUN }));
  return { ...body, messages: [...(body.messages as unknown[]), ...turn.items, { role: 'user', content: results }] };
}

/**
 * An Anthropic message's content: the assistant turn goes back as it came, every block kept (thinking blocks with
 * their signatures must be, for the model to go on after a tool result).
 */
function anthropicTurn(json: unknown, name: string): SearchTurn | undefined {
  const content = (json as { content?: unknown } | null)?.content;
  return Array.isArray(content) ? anthropicSearchTurn(content as Record<string, unknown>[], name) : undefined;
}

function anthropicSearchTurn(content: readonly Record<string, unknown>[], name: string): SearchTurn | undefined {
  const calls = content.filter((block) => block.type === 'tool_use' && typeof block.id === 'string');
  const search = calls.filter((block) => block.name === name);
  if (search.length === 0) return undefined;
  return {
    calls: search.map((block) => ({ callId: block.id as string, arguments: JSON.stringify(block.input ?? {}) })),
    allCallIds: calls.map((block) => block.id as string),
    items: [{ role: 'assistant', content }],
  };
}

/**
 * Anthropic Messages events: the first text or the first call of another tool decides; the content blocks are rebuilt
 * from their deltas (text, tool input JSON, thinking and its signature) to send the assistant turn back whole.
 */
class AnthropicStreamReader extends SseReader {
  private readonly blocks: Record<string, unknown>[] = [];
  private readonly inputs = new Map<number, string>();

  constructor(private readonly name: string) {
    super();
  }

  protected event(json: Record<string, unknown>): 'hold' | 'pass' {
    const index = typeof json.index === 'number' ? json.index : -1;
    if (json.type === 'content_block_start') {
      const block = { ...(json.content_block as Record<string, unknown>) };
      this.blocks[index] = block;
      if (block.type === 'tool_use') {
        this.inputs.set(index, '');
        if (block.name === this.name) this.searching = true;
        else return 'pass';
      }
      if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') return 'pass';
    } else if (json.type === 'content_block_delta') {
      const block = this.blocks[index];
      const delta = json.delta as Record<string, unknown> | undefined;
      if (!block || !delta) return 'hold';
      if (delta.type === 'text_delta' && typeof delta.text === 'string') {
        block.text = `${(block.text as string | undefined) ?? ''}${delta.text}`;
        if (delta.text !== '') return 'pass';
      } else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') {
        this.inputs.set(index, (this.inputs.get(index) ?? '') + delta.partial_json);
      } else if (delta.type === 'thinking_delta' && typeof delta.thinking === 'string') {
        block.thinking = `${(block.thinking as string | undefined) ?? ''}${delta.thinking}`;
      } else if (delta.type === 'signature_delta' && typeof delta.signature === 'string') {
        block.signature = delta.signature;
      }
    }
    return 'hold';
  }

  finish(): SearchTurn | undefined {
    if (!this.searching) return undefined;
    const content = this.blocks.flatMap((block, index) => {
      if (!block) return [];
      if (block.type !== 'tool_use') return [block];
      return [{ ...block, input: parseInput(this.inputs.get(index) ?? '') }];
    });
    return anthropicSearchTurn(content, this.name);
  }
}

/** A streamed tool_use's input, from its JSON deltas; a malformed one is read as no arguments. */
function parseInput(text: string): unknown {
  try {
    return text === '' ? {} : JSON.parse(text);
  } catch {
    return {};
  }
}
