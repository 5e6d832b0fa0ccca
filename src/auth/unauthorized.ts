import { ToolrouterError } from '../errors.js';

/**
 * The request carried no usable credential, or a wrong, deleted or expired one. Its own module, below both the key
 * check (auth.ts) and the token verifier (identity/verifier.ts), which both raise it.
 */
export class UnauthorizedError extends ToolrouterError {
  override readonly name = 'UnauthorizedError';
  /** `missing`: no credential came; `invalid`: a wrong, deleted or expired one did. */
  constructor(message: string, reason: 'missing' | 'invalid') {
    super('unauthorized', message, { reason });
  }
}
