import type { IncomingMessage } from 'node:http';

/**
 * Reads a request body of a declared length into one buffer allocated up front, each chunk copied in as it arrives and
 * then dropped. body-parser (raw-body) keeps every chunk until the end and then concatenates them, so a 100 MB catalog
 * was held twice at its peak (issue 55). Errors carry body-parser's `type` and `status`, so they are answered alike.
 */
export function readBodyBytes(req: IncomingMessage, length: number, limit: number): Promise<Buffer> {
  if (length > limit) {
    req.resume();
    return Promise.reject(bodyError(413, 'entity.too.large', 'request entity too large'));
  }
  return new Promise((resolve, reject) => {
    const bytes = Buffer.allocUnsafe(length);
    let received = 0;
    const finish = (error?: Error) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      if (error) {
        req.resume();
        reject(error);
      } else resolve(bytes);
    };
    const onData = (chunk: Buffer) => {
      if (received + chunk.length > length) return finish(bodyError(400, 'request.size.invalid', 'request size did not match content length'));
      chunk.copy(bytes, received);
      received += chunk.length;
    };
    const onEnd = () => {
      if (received !== length) finish(bodyError(400, 'request.size.invalid', 'request size did not match content length'));
      else finish();
    };
    const onError = (error: Error) => finish(error);
    // A client that goes away mid-body: 'close' without 'end'.
    const onClose = () => {
      if (received !== length || !req.complete) finish(bodyError(400, 'request.aborted', 'request aborted'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * Frees a body's bytes now rather than at some later garbage collection: once parsed they are dead, and a catalog's
 * 100 MB otherwise lived on for seconds, through validation and into the index build (issue 55). Only a buffer that is
 * the whole of its memory is freed (detached); one sharing it (a slice of a pool) is left to the collector.
 */
export function releaseBodyBytes(bytes: Buffer): void {
  // ES2024's ArrayBuffer.transfer (Node 21+), not in the compiler's lib yet: detaching frees the memory at once.
  const memory = bytes.buffer as ArrayBuffer & { readonly detached: boolean; transfer(length: number): ArrayBuffer };
  const whole = memory instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === memory.byteLength;
  if (whole && typeof memory.transfer === 'function' && !memory.detached) memory.transfer(0);
}

function bodyError(status: number, type: string, message: string): Error {
  return Object.assign(new Error(message), { status, statusCode: status, type, expose: true });
}

const UNITS: Record<string, number> = { b: 1, kb: 1 << 10, mb: 1 << 20, gb: 1 << 30, tb: 1024 ** 4, pb: 1024 ** 5 };

/** A size as body-parser's `limit` reads it (the `bytes` package: "20mb", "1.5gb", "512kb", "1000"); NaN when not one. */
export function limitBytes(limit: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|pb)?\s*$/i.exec(limit);
  if (!match) return Number.NaN;
  return Math.floor(Number(match[1]) * UNITS[(match[2] ?? 'b').toLowerCase()]!);
}
