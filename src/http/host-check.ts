import { isIP } from 'node:net';
import type { RequestHandler } from 'express';
import { ToolrouterError } from '../errors.js';

export interface HostCheckOptions {
  /** The address the service listens on (config `host`): its own name is always accepted. */
  host: string;
  /** Names accepted in `Host` beyond loopback (security.allowedHosts); `*` accepts any. */
  allowedHosts: readonly string[];
  /** Origins (`scheme://host[:port]`) whose pages may change things here besides the service's own (security.allowedOrigins). */
  allowedOrigins: readonly string[];
}

/** Reading never changes state; every other method may (a search records feedback, /mcp calls tools). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * DNS rebinding and cross-site requests, for a service that answers without a key (open mode, bound to loopback). A
 * web page the user visits can point a name of its own at 127.0.0.1 and then talk to the service as same-origin: its
 * requests carry that name in `Host`, so only loopback names (and the configured host and security.allowedHosts) are
 * answered. A page on another origin can also send "simple" requests (text/plain POSTs, no preflight) straight to
 * 127.0.0.1: browsers name the page in `Origin`, so a state-changing request whose Origin is not the service's own
 * (the `Host` it was sent to) is refused. Clients that are not browsers send no Origin and are not affected.
 */
export function hostCheck(options: HostCheckOptions): RequestHandler {
  const anyHost = options.allowedHosts.includes('*');
  const names = new Set([...options.allowedHosts, options.host].map((name) => hostnameOf(name) ?? name.toLowerCase()));
  const origins = new Set(options.allowedOrigins.map((origin) => origin.toLowerCase().replace(/\/+$/, '')));
  return (req, _res, next) => {
    const host = req.headers.host;
    const hostname = host === undefined ? undefined : hostnameOf(host);
    if (!anyHost && (hostname === undefined || !(isLoopback(hostname) || names.has(hostname)))) {
      throw new ToolrouterError(
        'forbidden',
        `Host "${host ?? ''}" is not accepted: without ADMIN_KEY toolrouter answers only requests addressed to loopback ` +
          `(localhost, 127.0.0.1, [::1]) or its configured host; add the name to security.allowedHosts to accept it`,
      );
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !SAFE_METHODS.has(req.method) && !sameOrigin(origin, host) && !origins.has(origin.toLowerCase())) {
      throw new ToolrouterError(
        'forbidden',
        `Origin "${origin}" is not this service's origin: a web page elsewhere may not change anything here ` +
          `(only GET is answered across origins); add the origin to security.allowedOrigins to accept it`,
      );
    }
    next();
  };
}

/** The host part of a Host header or a configured name, lower-cased, IPv6 in brackets; undefined when unreadable. */
function hostnameOf(host: string): string | undefined {
  const bare = isIP(host) === 6 ? `[${host}]` : host;
  try {
    const url = new URL(`http://${bare}`);
    // A Host header is a name and a port, nothing else (no user info, path or query smuggled in).
    if (url.username || url.password || url.pathname !== '/' || url.search || url.hash) return undefined;
    return url.hostname;
  } catch {
    return undefined;
  }
}

function isLoopback(hostname: string): boolean {
  if (hostname === 'localhost') return true;
  if (isIP(hostname) === 4) return hostname.startsWith('127.');
  // IPv6 in brackets: ::1, or an IPv4-mapped loopback (the URL parser writes ::ffff:127.0.0.1 as ::ffff:7f00:1).
  return hostname === '[::1]' || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(hostname);
}

/** Whether the page that sent the request (Origin) is on the host:port the request was sent to. */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined || origin === 'null') return false;
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.host === new URL(`http://${host}`).host;
  } catch {
    return false;
  }
}
