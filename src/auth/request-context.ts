import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What an upstream call needs to know of the request that caused it, beyond who the caller is (Access): the address
 * the caller reached toolrouter at (for links it is sent, like an authorization URL's callback) and the upstream
 * credentials it sent for this request only (`passthroughHeaders`). Carried by the request's async context, so the
 * faces and the gateway between the HTTP request and the upstream transport need not pass it along.
 */
export interface RequestScope {
  /** scheme://host the request came in at. */
  origin: string;
  /** `x-toolrouter-upstream-…` headers of the request, lower-case name → value; read by upstreams that allow them. */
  upstreamHeaders: ReadonlyMap<string, string>;
}

/** Request headers that carry a credential for an upstream server: `x-toolrouter-upstream-<server>-<header>`. */
export const UPSTREAM_HEADER_PREFIX = 'x-toolrouter-upstream-';

const storage = new AsyncLocalStorage<RequestScope>();

export function runInRequestScope<T>(scope: RequestScope, work: () => T): T {
  return storage.run(scope, work);
}

/** The scope of the request being served; undefined outside one (stdio, background reconnects and pings). */
export function currentRequestScope(): RequestScope | undefined {
  return storage.getStore();
}
