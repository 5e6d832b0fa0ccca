import { createParser, type EventSourceParser } from 'eventsource-parser';

/** One server-sent event whose data is JSON: its `event:` name (when the stream names them) and the parsed data. */
export interface JsonEvent {
  event?: string;
  data: Record<string, unknown>;
}

/**
 * Reads an upstream's SSE bytes as they come, in chunks cut anywhere (mid-line, mid-character), and hands each event
 * whose data is a JSON object to `onEvent`. `[DONE]` (OpenAI's end marker) and other non-JSON data are skipped.
 * eventsource-parser does the parsing, the one the OpenAI and Anthropic SDKs use, so what the proxy reads is what
 * their clients read.
 */
export class SseJsonReader {
  private readonly decoder = new TextDecoder();
  private readonly parser: EventSourceParser;

  constructor(onEvent: (event: JsonEvent) => void) {
    this.parser = createParser({
      onEvent: ({ event, data }) => {
        if (data === '' || data === '[DONE]') return;
        let json: unknown;
        try {
          json = JSON.parse(data);
        } catch {
          return;
        }
        if (typeof json === 'object' && json !== null && !Array.isArray(json)) onEvent({ ...(event === undefined ? {} : { event }), data: json as Record<string, unknown> });
      },
    });
  }

  push(chunk: Uint8Array): void {
    this.parser.feed(this.decoder.decode(chunk, { stream: true }));
  }
}

export const isEventStream = (answer: globalThis.Response): boolean => (answer.headers.get('content-type') ?? '').includes('text/event-stream');
