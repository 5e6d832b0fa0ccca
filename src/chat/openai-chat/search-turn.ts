import { answerText, SseReader, turnReader, type SearchAnswer, type SearchTurn, type SearchTurnReader } from '../core/search-tool.js';

/** Chat completions' side of the proxy's search tool (src/chat/core/search-tool.ts): its shape, its turns, and what follows them. */

export function chatSearchTool(name: string, description: string, parameters: Record<string, unknown>): Record<string, unknown> {
  return { type: 'function', function: { name, description, parameters } };
}

/** Reads a chat completion (JSON or SSE chunks) for a call of the search tool. */
export function chatSearchTurnReader(name: string, answer: globalThis.Response): SearchTurnReader | undefined {
  return turnReader(answer, () => new ChatStreamReader(name), (json) => chatTurn(json, name));
}

/** The next request: the assistant message and a `tool` message answering each of its calls. */
export function chatContinuation(body: Record<string, unknown>, turn: SearchTurn, answers: ReadonlyMap<string, SearchAnswer>): Record<string, unknown> {
  const results = turn.allCallIds.map((id) => ({ role: 'tool', tool_call_id: id, content: answerText(answers.get(id)) }));
  return { ...body, messages: [...(body.messages as unknown[]), ...turn.items, ...results] };
}

function chatTurn(json: unknown, name: string): SearchTurn | undefined {
  const message = (json as { choices?: { message?: Record<string, unknown> }[] } | null)?.choices?.[0]?.message;
  const calls = (message?.tool_calls ?? []) as { id?: string; function?: { name?: string; arguments?: string } }[];
  return chatSearchTurn(typeof message?.content === 'string' ? message.content : null, calls, name);
}

function chatSearchTurn(content: string | null, calls: readonly { id?: string; function?: { name?: string; arguments?: string } }[], name: string): SearchTurn | undefined {
  const search = calls.filter((call) => call.function?.name === name);
  if (search.length === 0 || calls.some((call) => typeof call.id !== 'string' || typeof call.function?.name !== 'string')) return undefined;
  return {
    calls: search.map((call) => ({ callId: call.id!, arguments: call.function?.arguments ?? '' })),
    allCallIds: calls.map((call) => call.id!),
    items: [
      {
        role: 'assistant',
        content,
        tool_calls: calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.function!.name, arguments: call.function?.arguments ?? '' } })),
      },
    ],
  };
}

/** Chat completion chunks: the first content or the first named tool call decides. */
class ChatStreamReader extends SseReader {
  private content = '';
  private readonly calls: { id?: string; function: { name?: string; arguments: string } }[] = [];

  constructor(private readonly name: string) {
    super();
  }

  protected event(json: Record<string, unknown>): 'hold' | 'pass' {
    const delta = (json.choices as { delta?: Record<string, unknown> }[] | undefined)?.[0]?.delta;
    if (!delta) return 'hold';
    let verdict: 'hold' | 'pass' = 'hold';
    if (typeof delta.content === 'string' && delta.content !== '') {
      this.content += delta.content;
      verdict = 'pass';
    }
    if (typeof delta.refusal === 'string' && delta.refusal !== '') verdict = 'pass';
    for (const part of (delta.tool_calls ?? []) as { index?: number; id?: string; function?: { name?: string; arguments?: string } }[]) {
      const call = (this.calls[part.index ?? 0] ??= { function: { arguments: '' } });
      if (part.id) call.id = part.id;
      if (part.function?.name) {
        call.function.name = part.function.name;
        if (part.function.name === this.name && verdict === 'hold') this.searching = true;
        else if (!this.searching) verdict = 'pass';
      }
      if (part.function?.arguments) call.function.arguments += part.function.arguments;
    }
    return verdict;
  }

  finish(): SearchTurn | undefined {
    if (!this.searching) return undefined;
    return chatSearchTurn(this.content === '' ? null : this.content, this.calls.filter(Boolean), this.name);
  }
}
