/**
 * Bounds what an upstream can make toolrouter hold: every message read from an upstream is held whole only up to
 * mcp.maxResultBytes. A larger one is not buffered: its bytes are counted and dropped as they arrive, only its first
 * and last few hundred bytes are kept, and when it ends it is replaced by a JSON-RPC error response for the same request
 * id, so the call fails at once with a clear message (no timeout, no lost connection). The same cutter serves stdio
 * (newline-delimited), streamable HTTP event streams (blank-line-delimited events) and JSON bodies (one message).
 */
import { ReadBuffer } from '@modelcontextprotocol/client';

export const DEFAULT_MAX_RESULT_BYTES = 4 * 1024 * 1024;

/** JSON-RPC error code of a refused oversized result (implementation-defined server error range). */
export const RESULT_TOO_LARGE = -32050;

/** How messages are delimited on the stream. */
export type Framing = 'line' | 'sse' | 'whole';

/** Bytes kept of each end of an oversized message: enough to find its JSON-RPC id. */
const EDGE = 512;
const NEWLINE = 0x0a;

/** Splits a byte stream into messages, passing the ones within the limit and replacing larger ones. */
export class MessageCutter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private dropping = false;
  private droppedBytes = 0;
  private head = Buffer.alloc(0);
  private tail = Buffer.alloc(0);
  /** Bytes of the current line so far (sse: an empty line ends the event). */
  private lineBytes = 0;
  private lastByteWasCr = false;

  constructor(
    private readonly limit: number,
    private readonly framing: Framing,
    private readonly onRefused: (bytes: number, id: string | number | undefined) => void = () => {},
  ) {}

  /** Feeds a chunk; returns what may be passed on now (whole messages within the limit, or replacements). */
  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let start = 0;
    while (start < chunk.length) {
      const newline = this.framing === 'whole' ? -1 : chunk.indexOf(NEWLINE, start);
      const end = newline === -1 ? chunk.length : newline + 1;
      const piece = chunk.subarray(start, end);
      this.add(piece);
      if (newline !== -1) {
        // The line just ended, without its newline (and a CR before it): an empty one ends an SSE event.
        const crlf = newline > start ? chunk[newline - 1] === 0x0d : this.lastByteWasCr;
        const length = this.lineBytes + (newline - start) - (crlf ? 1 : 0);
        if (this.framing === 'line' || length === 0) this.finish(out);
        this.lineBytes = 0;
      } else {
        this.lineBytes += piece.length;
      }
      this.lastByteWasCr = chunk[end - 1] === 0x0d;
      start = end;
    }
    return out;
  }

  /** The stream ended: what is left (a whole-body message, or an unterminated last one). */
  end(): Buffer[] {
    const out: Buffer[] = [];
    if (this.pendingBytes > 0 || this.dropping) this.finish(out);
    return out;
  }

  private add(piece: Buffer): void {
    if (!this.dropping && this.pendingBytes + piece.length <= this.limit) {
      this.pending.push(piece);
      this.pendingBytes += piece.length;
      return;
    }
    if (!this.dropping) {
      const held = Buffer.concat([...this.pending, piece]);
      this.dropping = true;
      this.droppedBytes = held.length;
      this.head = Buffer.from(held.subarray(0, EDGE));
      this.tail = Buffer.from(held.subarray(Math.max(0, held.length - EDGE)));
      this.pending = [];
      this.pendingBytes = 0;
      return;
    }
    this.droppedBytes += piece.length;
    this.tail = piece.length >= EDGE ? Buffer.from(piece.subarray(piece.length - EDGE)) : Buffer.concat([this.tail, piece]).subarray(-EDGE);
  }

  private finish(out: Buffer[]): void {
    if (!this.dropping) {
      if (this.pendingBytes > 0) out.push(Buffer.concat(this.pending));
      this.pending = [];
      this.pendingBytes = 0;
      return;
    }
    const bytes = this.droppedBytes;
    const id = responseId(this.head.toString('utf8'), this.tail.toString('utf8'));
    this.dropping = false;
    this.droppedBytes = 0;
    this.head = Buffer.alloc(0);
    this.tail = Buffer.alloc(0);
    this.onRefused(bytes, id);
    // A request or notification from the server (or a response whose id cannot be found) is dropped: there is nobody
    // to answer. A response becomes an error response for its request.
    if (id === undefined) return;
    const message = JSON.stringify({
      jsonrpc: '2.0',
      id,
      error: {
        code: RESULT_TOO_LARGE,
        message: `result too large: ${bytes} bytes is more than mcp.maxResultBytes (${this.limit}); toolrouter refused it unread`,
        data: { bytes, limit: this.limit },
      },
    });
    out.push(Buffer.from(this.framing === 'sse' ? `event: message\ndata: ${message}\n\n` : this.framing === 'line' ? `${message}\n` : message));
  }
}

/**
 * The id of the JSON-RPC response a message starts or ends, from its first and last bytes. The SDKs write a response
 * as {result, jsonrpc, id} (id last) or {jsonrpc, id, result} (id first); a message that starts with "method" is a
 * request or notification, not a response.
 */
export function responseId(head: string, tail: string): string | number | undefined {
  const start = head.indexOf('{');
  if (start === -1) return undefined;
  const opening = head.slice(start);
  if (/^\{\s*"method"\s*:/.test(opening)) return undefined;
  const first = /^\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")/.exec(opening);
  const last = /"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/.exec(tail);
  const raw = first?.[1] ?? last?.[1];
  if (raw === undefined) return undefined;
  return raw.startsWith('"') ? (JSON.parse(raw) as string) : Number(raw);
}

/** The stdio transport's read buffer, with the cutter in front: no line longer than the limit is ever held. */
export class BoundedReadBuffer extends ReadBuffer {
  private readonly cutter: MessageCutter;

  constructor(
    limit: number,
    onRefused?: (bytes: number, id: string | number | undefined) => void,
    private readonly onRead?: (bytes: number) => void,
  ) {
    // The SDK's own cap (which closes the transport) sits above anything the cutter lets through.
    super({ maxBufferSize: limit + 2 * EDGE + 1_024 });
    this.cutter = new MessageCutter(limit, 'line', onRefused);
  }

  override append(chunk: Buffer): void {
    this.onRead?.(chunk.length);
    for (const piece of this.cutter.push(chunk)) super.append(piece);
  }
}

/** A response body with the cutter in front (streamable HTTP: SSE events or one JSON message). */
export function boundedBody(
  body: ReadableStream<Uint8Array>,
  framing: Framing,
  limit: number,
  onRefused?: (bytes: number, id: string | number | undefined) => void,
  onRead?: (bytes: number) => void,
): ReadableStream<Uint8Array> {
  const cutter = new MessageCutter(limit, framing, onRefused);
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        onRead?.(chunk.byteLength);
        for (const piece of cutter.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))) controller.enqueue(piece);
      },
      flush(controller) {
        for (const piece of cutter.end()) controller.enqueue(piece);
      },
    }),
  );
}
