/**
 * The 2026-07-28 form of the relay (multi-round-trip, "input required"): that revision has no server-to-client
 * requests, so when an upstream asks something during a call, toolrouter answers the client's `tools/call` with an
 * input-required result carrying the upstream's request, keeps the upstream call waiting, and resumes it with the
 * client's answer when the client retries the call with `inputResponses` and the `requestState` it was given.
 *
 * The waiting calls live in this process, keyed by an unguessable token bound to the caller (its key), and expire after
 * the call timeout: a stateless revision served by several instances needs the retry to reach the same instance.
 */
import { randomUUID } from 'node:crypto';
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

export class InputRounds {
  private readonly waiting = new Map<string, WaitingCall<unknown>>();

  constructor(
    /** How long a call waits for the client's next round before it is cancelled. */
    private readonly timeoutMs: number,
    /** At most this many calls wait at once (each holds an upstream call open). */
    private readonly maxWaiting = 1_000,
  ) {}

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

  /** Resumes a waiting call with the client's answers; undefined when the state is unknown, expired or another caller's. */
  async resume<R>(owner: string, requestState: string, responses: Record<string, unknown> | undefined): Promise<Round<R> | undefined> {
    const call = this.waiting.get(requestState) as WaitingCall<R> | undefined;
    if (!call || call.owner !== owner || !call.current) return undefined;
    const answer = responses?.[call.id];
    if (answer === undefined || typeof answer !== 'object' || answer === null) return undefined;
    this.waiting.delete(requestState);
    clearTimeout(call.timer);
    const question = call.current;
    call.current = undefined;
    question.answer(answer as Record<string, unknown>);
    return this.step(call);
  }

  private async step<R>(call: WaitingCall<R>): Promise<Round<R>> {
    const next = await call.next();
    if ('done' in next) return { done: next.done };
    if (this.waiting.size >= this.maxWaiting) {
      next.question.fail(new Error('too many calls are waiting for client input'));
      return this.step(call);
    }
    call.current = next.question;
    const state = randomUUID();
    this.waiting.set(state, call as WaitingCall<unknown>);
    call.timer = setTimeout(() => {
      this.waiting.delete(state);
      next.question.fail(new Error(`the client did not answer within ${this.timeoutMs} ms`));
      call.abort.abort();
    }, this.timeoutMs);
    call.timer.unref();
    return { inputRequests: { [call.id]: { method: next.question.method, params: next.question.params } }, requestState: state };
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
