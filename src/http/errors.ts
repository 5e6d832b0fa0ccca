import type { ErrorRequestHandler, RequestHandler } from 'express';
import { z } from 'zod';
import { CatalogConflictError, CatalogSourceError } from '../catalog/catalog.js';
import { ToolValidationError } from '../catalog/validate.js';
import { RedisUnavailableError } from '../redis.js';
import { IndexNotReadyError } from '../search/search.js';
import { requestId } from './request-log.js';

/** An error with the HTTP status and stable code clients see as `{error: {code, message}}`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** For 429 and 503: when the client may try again (sent as Retry-After). */
    readonly options: { retryAfterSeconds?: number } = {},
  ) {
    super(message);
  }
}

export const badRequest = (message: string) => new HttpError(400, 'invalid_request', message);

/** Parses a request body with a zod schema; the 400 names every bad field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw badRequest('request body must be a JSON object (send Content-Type: application/json)');
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    throw badRequest(parsed.error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`).join('; '));
  }
  return parsed.data;
}

/** A search query as every route takes it: a non-blank string within the configured length. */
export function queryText(maxQueryLength: number) {
  return z
    .string({ error: 'is required and must be a string' })
    .max(maxQueryLength, `must be at most ${maxQueryLength} characters`)
    .refine((query) => query.trim().length > 0, 'must not be empty');
}

export const notFoundRoute: RequestHandler = (req, _res, next) => {
  next(new HttpError(404, 'not_found', `no route for ${req.method} ${req.path}`));
};

/** Maps domain errors to statuses; anything unexpected is a 500 whose details stay in the log. */
export function errorHandler(log: { error: (obj: object, msg: string) => void }): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const mapped = toHttpError(error);
    if (mapped.status === 500) {
      log.error({ err: error, reqId: requestId(res), method: req.method, path: req.path }, 'request failed');
    }
    const retryAfter = mapped.options.retryAfterSeconds ?? (mapped.status === 503 ? 1 : undefined);
    if (retryAfter !== undefined) res.setHeader('Retry-After', String(retryAfter));
    res.status(mapped.status).json({ error: { code: mapped.code, message: mapped.message } });
  };
}

function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof ToolValidationError || error instanceof CatalogSourceError) return badRequest(error.message);
  if (error instanceof CatalogConflictError) return new HttpError(409, 'conflict', error.message);
  if (error instanceof IndexNotReadyError) return new HttpError(503, 'index_not_ready', error.message);
  if (error instanceof RedisUnavailableError) return new HttpError(503, 'redis_unavailable', error.message);
  // body-parser marks its own errors with a type and a status.
  const parserError = error as { type?: string; status?: number; message?: string };
  if (parserError.type === 'entity.parse.failed') return new HttpError(400, 'invalid_json', `malformed JSON body: ${parserError.message}`);
  if (parserError.type === 'entity.too.deep') return new HttpError(400, 'json_too_deep', parserError.message ?? 'JSON body nests too deep');
  if (parserError.type === 'entity.too.large') return new HttpError(413, 'payload_too_large', 'request body is larger than the configured limit');
  if (typeof parserError.status === 'number' && parserError.status >= 400 && parserError.status < 500) {
    return new HttpError(parserError.status, 'invalid_request', parserError.message ?? 'bad request');
  }
  return new HttpError(500, 'internal', 'internal error');
}
