import { randomUUID } from 'node:crypto';
import { ToolrouterError } from '../../../errors.js';

/** MCP's URLElicitationRequired (2025-11-25): the request needs the user to visit a URL first. */
export const URL_ELICITATION_REQUIRED = -32042;

/** One URL elicitation as MCP clients read it from the error's `data.elicitations`. */
export interface UrlElicitation {
  mode: 'url';
  elicitationId: string;
  url: string;
  message: string;
}

/**
 * A caller without their own grant on a per-user OAuth server: nobody else's token is used; they are sent toolrouter's
 * connect link for their own authorization instead (bound to them: oauth/binding.ts). MCP faces answer it as the JSON-RPC error -32042 with `data.elicitations`; REST as
 * `url_elicitation_required` with `authorization_url` in the error body.
 */
export class UrlElicitationRequiredError extends ToolrouterError {
  override readonly name = 'UrlElicitationRequiredError';
  readonly elicitations: UrlElicitation[];

  constructor(server: string, url: string) {
    const message = `upstream MCP server "${server}" acts as each user with their own authorization: open the URL in your browser (it asks for the key or token you call with, so a forwarded link cannot be completed by someone else) to authorize your account, then call again`;
    const elicitations: UrlElicitation[] = [{ mode: 'url', elicitationId: randomUUID(), url, message: `Authorize toolrouter to use "${server}" as you` }];
    super('url_elicitation_required', message, { details: { authorization_url: url, elicitations } });
    this.elicitations = elicitations;
  }
}
