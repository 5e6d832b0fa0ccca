/**
 * The secret 2026-07-28 `requestState` tokens are signed with (src/mcp/relay/rounds.ts). A token names the instance
 * holding the waiting upstream call and is bound to the caller's key by an HMAC over both: a client cannot point it at
 * another call, nor use another key's, and the instance a retry reaches rejects a forged one before asking anyone.
 *
 * Every instance must verify what any other signed, so the secret is shared: with Redis it is generated once, by
 * whichever instance comes first (`SET NX`), and read by the others (src/state/redis/rounds.ts). Chosen over a
 * configured secret because nothing has to be set up, nor kept equal across instances by the operator (an open service
 * has no ADMIN_KEY to derive one from, and a mismatch would break every round that crosses instances), and a leaked
 * secret lets no one do more than the token's own key may do anyway. Without Redis it is random per process.
 */
import { randomBytes } from 'node:crypto';

export interface RoundSecrets {
  /** The secret to sign (and first try to verify) with. */
  current(): Buffer;
  /**
   * Re-reads the shared secret, for a token that did not verify: another instance may have replaced it (Redis lost it
   * and the first instance to notice wrote a new one). Resolves to the secret now current.
   */
  refresh(): Promise<Buffer>;
  close(): Promise<void>;
}

/** One process: a random secret, gone with the process (as its waiting calls are). */
export class LocalRoundSecrets implements RoundSecrets {
  private readonly secret = randomBytes(32);

  current(): Buffer {
    return this.secret;
  }

  async refresh(): Promise<Buffer> {
    return this.secret;
  }

  async close(): Promise<void> {}
}
