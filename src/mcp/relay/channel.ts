/**
 * The per-call "client channel": what an upstream may ask of the client whose call it is serving (elicitation,
 * sampling) and what it may tell it (log messages, URL-elicitation completion). Each face builds one per call from its
 * SDK's request context; the gateway hands it down with the call; the upstream connection routes the upstream's
 * server-to-client requests to it (scope.ts). Nothing here knows a transport or an SDK.
 */

/** RFC 5424 severities, most verbose first, as MCP names them. */
export const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** What a client may have declared that the relay needs to know. */
export type RelayFeature = 'elicitation.form' | 'elicitation.url' | 'sampling' | 'roots';

/** Server-to-client requests toolrouter relays. */
export type RelayedRequestMethod = 'elicitation/create' | 'sampling/createMessage' | 'roots/list';

export interface ClientChannel {
  /** The session (or stateless caller) the call came from: two channels with the same id belong to one client. */
  readonly id: string;
  /** Whether the client declared this capability; an undeclared one is refused, never sent. */
  supports(feature: RelayFeature): boolean;
  /** Sends the request to the client as part of the call it made; resolves with the client's result as given. */
  request(method: RelayedRequestMethod, params: Record<string, unknown>, signal: AbortSignal): Promise<Record<string, unknown>>;
  /** A notification that belongs to the call (notifications/message, notifications/elicitation/complete). */
  notify(method: string, params: Record<string, unknown>): void;
  /** The log level the client set (logging/setLevel), sent with the call to a 2026-07-28 upstream; none: not set. */
  level?(): LogLevel | undefined;
}

/** The per-call context threaded through the gateway's call path (one optional object, not more positional arguments). */
export interface RelayContext {
  /** Absent: the caller cannot be asked anything (REST, a stateless caller without a channel); requests are refused. */
  channel?: ClientChannel;
}

/** The feature a server-to-client request needs the client to have declared. */
export function featureOf(method: RelayedRequestMethod, params: Record<string, unknown>): RelayFeature {
  if (method === 'sampling/createMessage') return 'sampling';
  if (method === 'roots/list') return 'roots';
  return params.mode === 'url' ? 'elicitation.url' : 'elicitation.form';
}

/**
 * Reads a client's declared capabilities (2025-11-25 `ClientCapabilities`). `elicitation: {}` means form only (the
 * revision before modes were named); `url` must be declared explicitly.
 */
export function declared(
  capabilities: { elicitation?: { form?: unknown; url?: unknown }; sampling?: unknown; roots?: unknown } | undefined,
  feature: RelayFeature,
): boolean {
  const elicitation = capabilities?.elicitation;
  switch (feature) {
    case 'roots':
      return capabilities?.roots !== undefined;
    case 'sampling':
      return capabilities?.sampling !== undefined;
    case 'elicitation.url':
      return elicitation?.url !== undefined;
    case 'elicitation.form':
      return elicitation !== undefined && (elicitation.form !== undefined || elicitation.url === undefined);
  }
}
