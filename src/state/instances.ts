/**
 * The instance registry: which API instances are up, and a mailbox to each. Work that outlives a request (a task's
 * upstream call, a 2026-07-28 call waiting for its next round) runs in one process; the record of it (a task, a
 * requestState) names that instance, so another instance serving a later request can reach it (cancel a task, hand it
 * the client's answers) or, when it is gone, say so instead of "not found".
 *
 * Without Redis there is one instance (`LocalInstances`): every message is to itself. With Redis
 * (src/state/redis/instances.ts) each instance has a random id, a heartbeat key with a short TTL, and a channel.
 */
import { randomBytes } from 'node:crypto';

/** A message handler: its answer (any JSON) goes back to the asker; a throw becomes the asker's rejection. */
export type InstanceHandler = (body: unknown) => Promise<unknown>;

export interface InstanceRegistry {
  /** This instance's id: random at start, never reused. */
  readonly id: string;
  /** Whether the instance with this id is still up (its heartbeat has not expired). Always true for this instance. */
  isAlive(id: string): Promise<boolean>;
  /** Handles messages of `topic` sent to this instance (one handler per topic). */
  handle(topic: string, handler: InstanceHandler): void;
  /**
   * Sends `body` to the handler of `topic` on instance `to` and waits for its answer, at most `timeoutMs`. Rejects
   * with InstanceGoneError as soon as the instance is known to be down (before or while waiting), with an Error on
   * timeout, and with the handler's own error message when it threw.
   */
  ask(to: string, topic: string, body: unknown, timeoutMs: number): Promise<unknown>;
  close(): Promise<void>;
}

/** The instance a request needs is not up any more (killed, stopped, lost its Redis connection for longer than its TTL). */
export class InstanceGoneError extends Error {
  constructor(readonly instance: string) {
    super(`toolrouter instance ${instance} is gone`);
  }
}

/** An error a handler threw, as the asker sees it (the message travels; the stack stays where it happened). */
export class InstanceHandlerError extends Error {}

export function newInstanceId(): string {
  return randomBytes(8).toString('hex');
}

/** One process, no Redis: the only instance is this one. */
export class LocalInstances implements InstanceRegistry {
  readonly id = newInstanceId();
  private readonly handlers = new Map<string, InstanceHandler>();

  async isAlive(id: string): Promise<boolean> {
    return id === this.id;
  }

  handle(topic: string, handler: InstanceHandler): void {
    if (this.handlers.has(topic)) throw new Error(`a handler already handles ${topic}`);
    this.handlers.set(topic, handler);
  }

  async ask(to: string, topic: string, body: unknown, _timeoutMs?: number): Promise<unknown> {
    const handler = to === this.id ? this.handlers.get(topic) : undefined;
    if (!handler) throw new InstanceGoneError(to);
    try {
      return await handler(body);
    } catch (error) {
      throw new InstanceHandlerError(error instanceof Error ? error.message : String(error));
    }
  }

  async close(): Promise<void> {
    this.handlers.clear();
  }
}
