/**
 * The 2026-07-28 form of the relay (multi-round-trip, "input required"): that revision has no server-to-client
 * requests, so when an upstream asks something during a call, toolrouter answers the client's `tools/call` with an
 * input-required result carrying the upstream's request, keeps the upstream call waiting, and resumes it with the
 * client's answer when the client retries the call with `inputResponses` and the `requestState` it was given.
 *
 * The waiting calls live in the process that started them and expire after the call timeout. The `requestState` names
 * that instance and is signed, bound to the caller's key (src/state/rounds.ts: the shared secret): a retry reaching
 * another instance is checked there and forwarded to the holder (src/state/instances.ts), which resumes the call and
 * hands the next round (or the result) back, so the client gets what one instance would have answered. A holder that
 * is gone answers RoundHolderGoneError: the client calls again without requestState.
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { InstanceGoneError, InstanceHandlerError, type InstanceRegistry } from '../../state/instances.js';
import { LocalRoundSecrets, type RoundSecrets } from '../../state/rounds.js';
import type { ClientChannel, RelayedRequestMethod, RelayFeature } from './channel.js';

interface Question {
  method: RelayedRequestMethod;
  params: Record<string, unknown>;
  answer(result: Record<string, unknown>): void;
  fail(error: Error): void;
}

/** An upstream call in progress for a 2026-07-28 caller, and what it waits for the client to answer. */
class WaitingCall<R> {
  readonly id = randomUUID();
  readonly abort = new AbortController();
  result!: Promise<R>;
  private readonly queue: Question[] = [];
  private wake: (() => void) | undefined;
  current: Question | undefined;
  timer: NodeJS.Timeout | undefined;

  constructor(readonly owner: string) {}

  ask(question: Question): void {
    this.queue.push(question);
    this.wake?.();
  }

  /** The next question, or undefined once the call has finished. */
  async next(): Promise<{ question: Question } | { done: R }> {
    const asked = async (): Promise<{ question: Question }> => {
      while (this.queue.length === 0) await new Promise<void>((resolve) => (this.wake = resolve));
      return { question: this.queue.shift()! };
    };
    return Promise.race([this.result.then((done) => ({ done })), asked()]);
  }
}

export type Round<R> = { done: R } | { inputRequests: Record<string, { method: string; params: Record<string, unknown> }>; requestState: string };

/** The instance holding a round's upstream call is gone: the call cannot resume; the client starts it again. */
export class RoundHolderGoneError extends Error {
  constructor(readonly instance: string) {
    super(`the toolrouter instance holding this call's upstream request (${instance}) stopped; call the tool again without requestState`);
  }
}

/** Where rounds are resumed from: other instances (with Redis) and the secret every instance signs tokens with. */
export interface InputRoundsState {
  instances?: InstanceRegistry;
  /** @defaultValue LocalRoundSecrets (this process only) */
  secrets?: RoundSecrets;
}

/** Longest requestState accepted: instance id, state id and MAC are far shorter; anything longer is not ours. */
const MAX_STATE_CHARS = 256;

/** How a resumed round's failure travels between instances: the JSON-RPC code and data survive. */
interface Failure {
  failed: { message: string; code?: number; data?: unknown };
}

export class InputRounds {
  private readonly waiting = new Map<string, WaitingCall<unknown>>();
  private readonly secrets: RoundSecrets;
  private readonly instances: InstanceRegistry | undefined;
  /** This process's name in tokens: the registry's instance id, or a local one. */
  private readonly self: string;

  constructor(
    /** How long a call waits for the client's next round before it is cancelled. */
    private readonly timeoutMs: number,
    /** At most this many calls wait at once (each holds an upstream call open). */
    private readonly maxWaiting = 1_000,
    state: InputRoundsState = {},
  ) {
    this.secrets = state.secrets ?? new LocalRoundSecrets();
    this.instances = state.instances;
    this.self = state.instances?.id ?? randomUUID().replaceAll('-', '');
    // A retry another instance received, for a call waiting here.
    this.instances?.handle('round.resume', async (body) => {
      const { stateId, owner, responses } = body as { stateId: string; owner: string; responses?: Record<string, unknown> };
      try {
        return (await this.resumeHere(owner, stateId, responses)) ?? null;
      } catch (error) {
        const { code, data } = error as { code?: unknown; data?: unknown };
        return { failed: { message: error instanceof Error ? error.message : String(error), ...(typeof code === 'number' ? { code, data } : {}) } } satisfies Failure;
      }
    });
  }

  /** Starts a call whose upstream questions become input-required rounds for a client with these capabilities. */
  async start<R>(owner: string, supports: (feature: RelayFeature) => boolean, work: (channel: ClientChannel, signal: AbortSignal) => Promise<R>): Promise<Round<R>> {
    const call = new WaitingCall<R>(owner);
    const channel: ClientChannel = {
      id: call.id,
      supports,
      request: (method, params) =>
        new Promise((answer, fail) => {
          call.ask({ method, params, answer, fail });
        }),
      // No stream to carry notifications on the stateless revision: logs of such calls stay in toolrouter's log.
      notify: () => {},
    };
    call.result = work(channel, call.abort.signal);
    call.result.catch(() => {});
    return this.step(call);
  }

  /**
   * Resumes a waiting call with the client's answers, on whichever instance holds it; undefined when the state is
   * unknown, forged, expired or another caller's. Throws RoundHolderGoneError when the holder is gone.
   */
  async resume<R>(owner: string, requestState: string, responses: Record<string, unknown> | undefined): Promise<Round<R> | undefined> {
    const parsed = await this.verify(owner, requestState);
    if (!parsed) return undefined;
    if (parsed.instance === this.self) return this.resumeHere<R>(owner, parsed.stateId, responses);
    if (!this.instances) return undefined;
    let answer: unknown;
    try {
      // The holder answers with the call's next round: as long as the upstream takes, bounded by the call timeout.
      answer = await this.instances.ask(parsed.instance, 'round.resume', { stateId: parsed.stateId, owner, responses }, this.timeoutMs + 5_000);
    } catch (error) {
      if (error instanceof InstanceGoneError) throw new RoundHolderGoneError(parsed.instance);
      if (error instanceof InstanceHandlerError) throw new Error(error.message, { cause: error });
      throw error;
    }
    if (answer === null || answer === undefined) return undefined;
    if (typeof answer === 'object' && 'failed' in answer) {
      const { failed } = answer as Failure;
      if (failed.code === undefined) throw new Error(failed.message);
      const error = new McpError(failed.code, failed.message, failed.data);
      // McpError prefixes its message with the code; the wire message must name it once (src/mcp/server/rpc-error.ts).
      error.message = failed.message;
      throw error;
    }
    return answer as Round<R>;
  }

  private async resumeHere<R>(owner: string, stateId: string, responses: Record<string, unknown> | undefined): Promise<Round<R> | undefined> {
    const call = this.waiting.get(stateId) as WaitingCall<R> | undefined;
    if (!call || call.owner !== owner || !call.current) return undefined;
    const answer = responses?.[call.id];
    if (answer === undefined || typeof answer !== 'object' || answer === null) return undefined;
    this.waiting.delete(stateId);
    clearTimeout(call.timer);
    const question = call.current;
    call.current = undefined;
    question.answer(answer as Record<string, unknown>);
    return this.step(call);
  }

  /** `<instance>.<state id>.<mac>`, the MAC over instance, state id and owner: the owner is bound without being shown. */
  private sign(stateId: string, owner: string, secret = this.secrets.current()): string {
    return `${this.self}.${stateId}.${mac(secret, this.self, stateId, owner)}`;
  }

  private async verify(owner: string, token: string): Promise<{ instance: string; stateId: string } | undefined> {
    if (token.length > MAX_STATE_CHARS) return undefined;
    const [instance, stateId, given, ...rest] = token.split('.');
    if (!instance || !stateId || !given || rest.length > 0) return undefined;
    const matches = (secret: Buffer) => {
      const expected = Buffer.from(mac(secret, instance, stateId, owner));
      const actual = Buffer.from(given);
      return expected.length === actual.length && timingSafeEqual(expected, actual);
    };
    if (matches(this.secrets.current()) || matches(await this.secrets.refresh())) return { instance, stateId };
    return undefined;
  }

  private async step<R>(call: WaitingCall<R>): Promise<Round<R>> {
    const next = await call.next();
    if ('done' in next) return { done: next.done };
    if (this.waiting.size >= this.maxWaiting) {
      next.question.fail(new Error('too many calls are waiting for client input'));
      return this.step(call);
    }
    call.current = next.question;
    const stateId = randomUUID();
    this.waiting.set(stateId, call as WaitingCall<unknown>);
    call.timer = setTimeout(() => {
      this.waiting.delete(stateId);
      next.question.fail(new Error(`the client did not answer within ${this.timeoutMs} ms`));
      call.abort.abort();
    }, this.timeoutMs);
    call.timer.unref();
    return { inputRequests: { [call.id]: { method: next.question.method, params: next.question.params } }, requestState: this.sign(stateId, call.owner) };
  }

  close(): void {
    for (const call of this.waiting.values()) {
      clearTimeout(call.timer);
      call.current?.fail(new Error('toolrouter is shutting down'));
      call.abort.abort();
    }
    this.waiting.clear();
  }
}

function mac(secret: Buffer, instance: string, stateId: string, owner: string): string {
  return createHmac('sha256', secret).update(`${instance}\n${stateId}\n${owner}`).digest('base64url');
}
