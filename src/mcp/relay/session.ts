/**
 * The client channel of a 2025-era session (the 1.x SDK Server behind /mcp sessions and `toolrouter stdio`): relayed
 * requests go to the client as requests related to its tools/call (on a streamable HTTP session they travel on that
 * call's response stream), log messages are filtered by the level the session set with logging/setLevel.
 */
import { randomUUID } from 'node:crypto';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { ResultSchema, type LoggingLevel, type ServerNotification, type ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { declared, LOG_LEVELS, type ClientChannel } from './channel.js';

/** Whether a message at `level` passes a session that asked for `minimum` (none asked: everything passes). */
export function passes(level: unknown, minimum: LoggingLevel | undefined): boolean {
  if (minimum === undefined) return true;
  const rank = LOG_LEVELS.indexOf(level as LoggingLevel);
  return rank !== -1 && rank >= LOG_LEVELS.indexOf(minimum);
}

export class SessionRelay {
  /** One per session: the relay compares it to keep a request to the client whose call caused it. */
  readonly id = randomUUID();
  private level: LoggingLevel | undefined;

  constructor(
    private readonly server: Server,
    /** How long a relayed request may wait for the client (a person answering a form): the call's own bound. */
    private readonly timeoutMs: number,
  ) {}

  setLevel(level: LoggingLevel): void {
    this.level = level;
  }

  get logLevel(): LoggingLevel | undefined {
    return this.level;
  }

  /** The channel for one tools/call of this session. */
  channel(extra: RequestHandlerExtra<ServerRequest, ServerNotification>): ClientChannel {
    return {
      id: this.id,
      supports: (feature) => declared(this.server.getClientCapabilities(), feature),
      request: async (method, params, signal) =>
        (await extra.sendRequest({ method, params } as ServerRequest, ResultSchema, { signal, timeout: this.timeoutMs })) as Record<string, unknown>,
      notify: (method, params) => {
        if (method === 'notifications/message' && !passes(params.level, this.level)) return;
        void extra.sendNotification({ method, params } as ServerNotification).catch(() => {});
      },
      level: () => this.level,
    };
  }

  /**
   * The channel for a tools/call running as a background task (MCP 2025-11-25): there is no request stream to relay
   * on, so requests and notifications are queued for the task (related-task metadata) and delivered when the client
   * calls tasks/result; while a request waits for its answer the task says `input_required`, then `working` again.
   */
  taskChannel(taskId: string, status: (status: 'working' | 'input_required') => void): ClientChannel {
    let waiting = 0;
    const relatedTask = { taskId };
    return {
      id: this.id,
      supports: (feature) => declared(this.server.getClientCapabilities(), feature),
      request: async (method, params, signal) => {
        if (waiting++ === 0) status('input_required');
        try {
          return (await this.server.request({ method, params } as ServerRequest, ResultSchema, { signal, timeout: this.timeoutMs, relatedTask })) as Record<string, unknown>;
        } finally {
          if (--waiting === 0) status('working');
        }
      },
      notify: (method, params) => {
        if (method === 'notifications/message' && !passes(params.level, this.level)) return;
        // A full queue (a client that never fetches the result) drops the message.
        void this.server.notification({ method, params } as ServerNotification, { relatedTask }).catch(() => {});
      },
      level: () => this.level,
    };
  }
}
