/**
 * Which call a server-to-client message from an upstream belongs to. One connection per upstream serves every session,
 * so an upstream's `elicitation/create` must be tied to the call that caused it, and only ever reach that call's client:
 * - exactly, through the async context of the call (AsyncLocalStorage): a streamable HTTP upstream sends related
 *   requests on the response stream of the call's POST, which is read inside the call's context, and a 2026-07-28
 *   upstream's input-required rounds are driven inside the call itself;
 * - otherwise (stdio, a 2025 server's standalone stream), from the calls in flight on that connection: when they all
 *   come from one client, that client; when several clients are calling the server at once the message cannot be
 *   attributed, and it is refused rather than guessed.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ClientChannel } from './channel.js';

/** One forwarded call in flight on one upstream connection. */
export interface CallScope {
  readonly server: string;
  readonly channel: ClientChannel | undefined;
}

const current = new AsyncLocalStorage<CallScope>();

export type Attribution = { scope: CallScope } | { problem: string };

/** The calls in flight on one upstream connection, and the attribution of what the upstream sends during them. */
export class CallRegistry {
  private readonly inFlight = new Set<CallScope>();

  constructor(readonly server: string) {}

  /** Runs a forwarded call inside its scope. */
  async run<T>(channel: ClientChannel | undefined, work: () => Promise<T>): Promise<T> {
    const scope: CallScope = { server: this.server, channel };
    this.inFlight.add(scope);
    try {
      return await current.run(scope, work);
    } finally {
      this.inFlight.delete(scope);
    }
  }

  /** The call a message arriving now belongs to, or why none can be named. */
  attribute(): Attribution {
    const exact = current.getStore();
    if (exact && exact.server === this.server && this.inFlight.has(exact)) return { scope: exact };
    const scopes = [...this.inFlight];
    if (scopes.length === 0) return { problem: `no call to "${this.server}" is in progress through toolrouter, so there is no client to ask` };
    const clients = new Set(scopes.map((scope) => scope.channel?.id ?? ''));
    if (clients.size > 1) {
      return {
        problem: `several clients are calling "${this.server}" at once and this transport does not say which call the request belongs to; toolrouter refuses it rather than ask the wrong client`,
      };
    }
    return { scope: scopes[0]! };
  }

  get size(): number {
    return this.inFlight.size;
  }
}
