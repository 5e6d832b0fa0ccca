import type { Application, ErrorRequestHandler, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { toToolrouterError, ToolrouterError, type ErrorCode } from '../errors.js';
import { requestId } from './request-log.js';

/** A ToolrouterError a route throws with its status spelled out; clients see `{error: {code, message}}`. */
export class HttpError extends ToolrouterError {
  constructor(
    status: number,
    code: ErrorCode | (string & {}),
    message: string,
    /** For 429 and 503: when the client may try again (sent as Retry-After). */
    options: { retryAfterSeconds?: number } = {},
  ) {
    super(code, message, { ...options, status });
  }
}

export const badRequest = (message: string) => new ToolrouterError('invalid_request', message);

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
  next(new ToolrouterError('not_found', `no route for ${req.method} ${req.path}`));
};

/** Toolrouter's REST shape for an error: `{error: {code, message}}` and its status. */
export function toRestError(error: unknown): { status: number; retryAfterSeconds?: number; body: { error: { code: string; message: string } & Record<string, unknown> } } {
  const mapped = toToolrouterError(error);
  const retryAfterSeconds = mapped.retryAfterSeconds ?? (mapped.status === 503 ? 1 : undefined);
  return {
    status: mapped.status,
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
    // Details first: code and message cannot be overwritten by them.
    body: { error: { ...mapped.details, code: mapped.code, message: mapped.message } },
  };
}

/** How one face answers errors on its own paths; the app's last handler asks each face in turn. */
export interface FaceErrorShape {
  /** Whether a path (and the app serving it, whose mounted routes may decide) belongs to this face. */
  matches: (path: string, app: Application) => boolean;
  send: (res: Response, error: unknown) => void;
}

/**
 * The app's last handler. Errors take the shape of the face their path belongs to, wherever they were raised (auth,
 * rate limits, body parsing and JSON depth run before any route): each face in `faces` answers its own paths (OpenAI's
 * shape on the proxy's, JSON-RPC on /mcp), toolrouter's REST shape answers everything else. Anything unexpected is a
 * 500 whose details stay in the log.
 */
export function errorHandler(log: { error: (obj: object, msg: string) => void }, faces: readonly FaceErrorShape[] = []): ErrorRequestHandler {
  return (error, req, res, next) => {
    // Mid-stream failures cannot change the status any more; Express's default handler closes the connection.
    if (res.headersSent) return next(error);
    const mapped = toRestError(error);
    if (mapped.status === 500) log.error({ err: error, reqId: requestId(res), method: req.method, path: req.path }, 'request failed');
    const face = faces.find((candidate) => candidate.matches(req.path, req.app));
    if (face) return face.send(res, error);
    if (mapped.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(mapped.retryAfterSeconds));
    res.status(mapped.status).json(mapped.body);
  };
}
