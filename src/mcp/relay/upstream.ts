/**
 * The upstream side of the relay: the capabilities toolrouter declares to every upstream, and the handlers on its
 * client for what an upstream asks or tells during a call. Each is routed to the client channel of the call it belongs
 * to (scope.ts); a client that did not declare the capability is never sent the request: the upstream gets a clean
 * JSON-RPC error at once (no hang).
 */
import { ProtocolError, type Client, type ClientCapabilities } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { featureOf, LOG_LEVELS, type RelayedRequestMethod } from './channel.js';
import type { CallRegistry } from './scope.js';

/**
 * Declared to every upstream: what some caller may be able to do. A request a given caller cannot serve is refused
 * per call. Roots describe one client's workspace while an upstream connection is shared by every session: roots/list
 * during a call is answered with the calling client's roots, and outside any call (or for a client without roots) with
 * none, never with another session's. No list_changed: there is no one list to announce changes of.
 *
 * `tasks.requests` (MCP 2025-11-25): an upstream may send its sampling and elicitation requests task-augmented (some
 * servers, e.g. server-everything's `*-async` tools, only offer such tools to clients that declare it). toolrouter
 * answers such a request with its result directly, which the specification's requestors accept in place of a
 * CreateTaskResult; see answerPlainly below for why no receiver-side task is created.
 */
export const RELAY_CAPABILITIES: ClientCapabilities = {
  elicitation: { form: {}, url: {} },
  sampling: {},
  roots: {},
  tasks: { requests: { sampling: { createMessage: {} }, elicitation: { create: {} } } },
};

/**
 * The upstream's request as the caller gets it: without the task augmentation. The caller never declared tasks to
 * toolrouter for these requests (it answers a plain request) and the 2.x SDK client that talks to the upstream accepts
 * only a CreateMessageResult / ElicitResult from these handlers (it validates them), so the answer is the result itself,
 * given when the caller has answered: the upstream's wait is bounded by the call that caused it.
 */
export function answerPlainly(params: Record<string, unknown>): Record<string, unknown> {
  const { task: _task, ...plain } = params;
  return plain;
}

/** JSON-RPC code for a relayed request refused (the MCP specification's "invalid request" family: -32600). */
const REFUSED = -32600;

export function installRelayHandlers(client: Client, registry: CallRegistry, log: Logger): void {
  const relay = async (method: RelayedRequestMethod, params: Record<string, unknown>, signal: AbortSignal): Promise<Record<string, unknown>> => {
    const attributed = registry.attribute();
    if ('problem' in attributed) {
      log.debug({ method, problem: attributed.problem }, 'relayed request refused');
      throw new ProtocolError(REFUSED, `toolrouter cannot relay ${method}: ${attributed.problem}`);
    }
    const channel = attributed.scope.channel;
    const feature = featureOf(method, params);
    if (!channel) throw new ProtocolError(REFUSED, `toolrouter cannot relay ${method}: the caller cannot be asked anything on the route it came by (REST: no client to ask)`);
    if (!channel.supports(feature)) {
      throw new ProtocolError(REFUSED, `toolrouter cannot relay ${method}: the calling client did not declare ${feature.replace('.', ' (')}${feature.includes('.') ? ')' : ''} support`);
    }
    return channel.request(method, answerPlainly(params), signal);
  };
  client.setRequestHandler('elicitation/create', async (request, ctx) => (await relay('elicitation/create', request.params as never, ctx.mcpReq.signal)) as never);
  client.setRequestHandler('roots/list', async (_request, ctx) => {
    const attributed = registry.attribute();
    const channel = 'scope' in attributed ? attributed.scope.channel : undefined;
    if (!channel?.supports('roots')) return { roots: [] };
    return (await channel.request('roots/list', {}, ctx.mcpReq.signal)) as never;
  });
  client.setRequestHandler('sampling/createMessage', async (request, ctx) => (await relay('sampling/createMessage', request.params as never, ctx.mcpReq.signal)) as never);

  // Notifications that belong to a call go to its client, namespaced by server; unattributable ones only to our log.
  const toCaller = (method: string, params: Record<string, unknown>) => {
    const attributed = registry.attribute();
    if ('scope' in attributed) attributed.scope.channel?.notify(method, params);
    else log.debug({ method, problem: attributed.problem }, 'upstream notification not attributable to a call');
  };
  client.setNotificationHandler('notifications/message', (notification) => {
    const { level, logger, data } = notification.params;
    const named = logger === undefined ? registry.server : `${registry.server}/${logger}`;
    if (!LOG_LEVELS.includes(level as (typeof LOG_LEVELS)[number])) return;
    toCaller('notifications/message', { level, logger: named, data });
  });
  client.setNotificationHandler('notifications/elicitation/complete', (notification) => toCaller('notifications/elicitation/complete', notification.params as never));
}
