import { randomUUID } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import type { Logger } from 'pino';

/** A caller's id is kept only when it cannot forge log fields or headers; anything else gets a fresh one. */
const ACCEPTED_ID = /^[A-Za-z0-9_.:@/+=-]{1,128}$/;

/** Probes and scrapes come every few seconds; logging them at info would bury the requests that matter. */
const QUIET_PATHS = new Set(['/health', '/ready', '/metrics']);

/** The id of the request a response belongs to (set by requestLog). */
export function requestId(res: Response): string | undefined {
  return (res.locals as { requestId?: string }).requestId;
}

/**
 * Gives every request an id (the caller's `x-request-id`, else a new UUID), echoes it in the response header, and
 * logs one JSON line per request when it ends: id, method, path, status, duration.
 */
export function requestLog(log: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && ACCEPTED_ID.test(incoming) ? incoming : randomUUID();
    (res.locals as { requestId?: string }).requestId = id;
    res.setHeader('x-request-id', id);
    const level = QUIET_PATHS.has(req.path) ? 'debug' : 'info';
    // Nothing would be written (level warn or quieter): no timer, no listeners on the hot path.
    if (!log.isLevelEnabled('info')) return next();
    const started = performance.now();
    let finished = false;
    res.once('finish', () => {
      finished = true;
      log[level]({ reqId: id, method: req.method, path: req.path, status: res.statusCode, ms: Math.round(performance.now() - started) }, 'request');
    });
    res.once('close', () => {
      if (!finished) log.info({ reqId: id, method: req.method, path: req.path, ms: Math.round(performance.now() - started) }, 'connection closed before the response ended');
    });
    next();
  };
}
