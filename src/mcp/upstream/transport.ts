/**
 * The transport to one upstream server, made in one place: stdio (a spawned process), streamable HTTP, or the legacy
 * HTTP+SSE transport. Authentication for HTTP servers is the SDK's `authProvider`, handed in through the options.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import type { PassThrough } from 'node:stream';
import { SSEClientTransport, StreamableHTTPClientTransport, type AuthProvider, type OAuthClientProvider, type Transport } from '@modelcontextprotocol/client';
import { getDefaultEnvironment, StdioClientTransport, type StdioServerParameters } from '@modelcontextprotocol/client/stdio';
import { currentRequestScope, UPSTREAM_HEADER_PREFIX } from '../../auth/request-context.js';
import { bodyExcerpt, type HttpFailure } from './errors.js';
import { BoundedReadBuffer, boundedBody, DEFAULT_MAX_RESULT_BYTES } from './bounds.js';
import { endGroup } from './process-group.js';
import type { UpstreamServerConfig } from './types.js';

/**
 * Variables a stdio server gets from toolrouter's environment beside the SDK's minimal default (HOME, LOGNAME, PATH,
 * SHELL, TERM, USER): the network settings a server needs to reach anything from where toolrouter runs. Without them a
 * server started through `npx` cannot reach its registry behind a proxy or a TLS-inspecting firewall, and fails with
 * nothing but a timeout. A server's own `env` wins (an empty value clears one).
 */
export const INHERITED_NETWORK_VARIABLES = [
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
] as const;

/** The environment a stdio server starts with: the SDK's default, the network variables above, then its `env`. */
export function stdioEnvironment(configured: Record<string, string> | undefined, from: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env = getDefaultEnvironment();
  for (const name of INHERITED_NETWORK_VARIABLES) {
    const value = from[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...configured };
}

export interface TransportOptions {
  /** Each non-empty line the server process writes to stderr (stdio only). */
  onStderr?: (line: string) => void;
  /** Each failed (non-2xx) HTTP response: the SDK's errors keep the body but not the status text or WWW-Authenticate. */
  onHttpFailure?: (failure: HttpFailure) => void;
  /** Authorization for HTTP servers (OAuth): the SDK asks it for tokens and reports 401s to it. */
  authProvider?: AuthProvider | OAuthClientProvider;
  /** Largest message read from the server; larger ones are replaced by an error for their request (bounds.ts). */
  maxResultBytes?: number;
  /** Each message refused for its size. */
  onRefused?: (bytes: number) => void;
  /** Bytes read from the server (liveness: a server busy sending is not gone). */
  onRead?: (bytes: number) => void;
  /**
   * Headers a request may carry for this server (`passthroughHeaders`): read from the request being served when a
   * message is sent (src/auth/request-context.ts), so they go with that request's calls only.
   */
  passthrough?: { server: string; headers: readonly string[] };
}

/** The SDK transport's fields that starting the process in a group of its own takes over. */
interface StdioInternals {
  _process?: ChildProcess;
  _readBuffer: { append(chunk: Buffer): void; clear(): void };
  _serverParams: StdioServerParameters;
  _stderrStream: PassThrough | null;
  processReadBuffer(): void;
}

/**
 * The SDK's stdio transport, probing in place: the v2 client negotiates a revision on the base class by spawning a
 * throwaway sibling process for its server/discover probe, then the real one; a subclass probes on the real child's
 * pipe (a 2025 server answers the unknown method with an error, and initialize follows on the same pipe). One process
 * per connection, and half the start-up time for servers that are slow to start.
 *
 * On POSIX the server is spawned as the leader of its own process group, and closing ends the whole group
 * (process-group.ts): what a wrapper such as `npx` started ends with it, also when the close comes while the server is
 * still starting. The SDK spawns in toolrouter's group and signals its direct child only.
 */
class InPlaceStdioTransport extends StdioClientTransport {
  /** Once closing, the one close in progress (every caller waits for the group to end). */
  private closing: Promise<void> | undefined;
  /** The group's leader, kept after it exits: what it started may still be running (a wrapper that crashed). */
  private leader: ChildProcess | undefined;

  constructor(params: StdioServerParameters, maxResultBytes: number, onRefused?: (bytes: number) => void, onRead?: (bytes: number) => void) {
    super(params);
    // The SDK's buffer holds a whole line however long (and closes the transport past 10 MB); ours never holds more than
    // the limit, and answers an oversized result with an error for its request.
    (this as unknown as { _readBuffer: BoundedReadBuffer })._readBuffer = new BoundedReadBuffer(maxResultBytes, onRefused && ((bytes) => onRefused(bytes)), onRead);
  }

  private get internals(): StdioInternals {
    return this as unknown as StdioInternals;
  }

  /** As the SDK's start (its events, its buffers), but spawned detached: the leader of a new process group. */
  override async start(): Promise<void> {
    if (process.platform === 'win32') return super.start();
    const self = this.internals;
    if (self._process) throw new Error('StdioClientTransport already started');
    // Closed before it started (toolrouter stopping while connecting): a process spawned now would be nobody's.
    if (this.closing) throw new Error('the stdio transport was closed before it started');
    const params = self._serverParams;
    await new Promise<void>((resolve, reject) => {
      const child = spawn(params.command, params.args ?? [], {
        env: { ...getDefaultEnvironment(), ...params.env },
        stdio: ['pipe', 'pipe', params.stderr ?? 'inherit'],
        shell: false,
        cwd: params.cwd,
        detached: true,
      });
      self._process = child;
      this.leader = child;
      child.on('error', (error) => {
        reject(error);
        this.onerror?.(error);
      });
      child.on('spawn', () => resolve());
      child.on('close', () => {
        if (self._process === child) self._process = undefined;
        this.onclose?.();
      });
      child.stdin?.on('error', (error) => this.onerror?.(error));
      child.stdout?.on('data', (chunk: Buffer) => {
        try {
          self._readBuffer.append(chunk);
          self.processReadBuffer();
        } catch (error) {
          this.onerror?.(error as Error);
          void this.close().catch(() => {});
        }
      });
      child.stdout?.on('error', (error) => this.onerror?.(error));
      if (self._stderrStream && child.stderr) child.stderr.pipe(self._stderrStream);
    });
  }

  /** Ends the server's whole process group: stdin closed, then SIGTERM, then SIGKILL (process-group.ts). */
  override close(): Promise<void> {
    if (process.platform === 'win32') return super.close();
    this.closing ??= this.endProcesses();
    return this.closing;
  }

  private async endProcesses(): Promise<void> {
    const self = this.internals;
    const leader = this.leader;
    self._process = undefined;
    this.leader = undefined;
    if (leader) await endGroup(leader);
    self._readBuffer.clear();
  }
}

export function createTransport(config: UpstreamServerConfig, options: TransportOptions = {}): Transport {
  if ('url' in config) {
    const common = {
      requestInit: { headers: config.headers ?? {} },
      fetch: recordingFetch(options.onHttpFailure, options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES, options.onRefused, options.onRead, options.passthrough),
      ...(options.authProvider ? { authProvider: options.authProvider } : {}),
    };
    if (config.type === 'sse') return new SSEClientTransport(new URL(config.url), common);
    return new StreamableHTTPClientTransport(new URL(config.url), common);
  }
  const transport = new InPlaceStdioTransport({
    command: config.command,
    args: config.args ?? [],
    env: stdioEnvironment(config.env),
    cwd: config.cwd,
    // Piped, not inherited: with `toolrouter stdio` our stderr is the client's log, and a server's chatter belongs in
    // our structured log; its last lines explain a crash in the status.
    stderr: 'pipe',
  }, options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES, options.onRefused, options.onRead);
  let partial = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.trim().length > 0) options.onStderr?.(line);
  });
  return transport;
}

/** The request's credentials for this server, added to one outgoing message; none outside a request. */
function withPassthrough(init: RequestInit | undefined, passthrough: NonNullable<TransportOptions['passthrough']>): RequestInit | undefined {
  const scope = currentRequestScope();
  if (!scope || scope.upstreamHeaders.size === 0) return init;
  let headers: Headers | undefined;
  for (const name of passthrough.headers) {
    const value = scope.upstreamHeaders.get(`${UPSTREAM_HEADER_PREFIX}${passthrough.server}-${name}`.toLowerCase());
    if (value === undefined) continue;
    headers ??= new Headers(init?.headers);
    headers.set(name, value);
  }
  return headers ? { ...init, headers } : init;
}

/** Ends an HTTP session politely (the server would expire it anyway). */
export async function terminateSession(transport: Transport | undefined): Promise<void> {
  if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) await transport.terminateSession();
}

/**
 * The HTTP transports pass one long-lived AbortSignal to every fetch; undici detaches its abort listener only when the
 * request object is garbage-collected, so a busy upstream trips Node's listener-leak warning although nothing leaks.
 * Failed responses are reported: the SDK's error keeps the body but not the status text or WWW-Authenticate.
 */
function recordingFetch(
  onFailure: ((failure: HttpFailure) => void) | undefined,
  maxResultBytes: number,
  onRefused?: (bytes: number) => void,
  onRead?: (bytes: number) => void,
  passthrough?: TransportOptions['passthrough'],
): typeof fetch {
  return async (input, init) => {
    if (init?.signal) setMaxListeners(0, init.signal);
    const response = bounded(await fetch(input, passthrough ? withPassthrough(init, passthrough) : init), maxResultBytes, onRefused, onRead);
    if (!response.ok && onFailure) {
      const wwwAuthenticate = response.headers.get('www-authenticate') ?? undefined;
      const body = await bodyExcerpt(response);
      onFailure({ status: response.status, statusText: response.statusText, ...(wwwAuthenticate ? { wwwAuthenticate } : {}), body });
    }
    return response;
  };
}

/** The response with its body read through the size bound (bounds.ts): event streams per event, JSON as one message. */
function bounded(response: Response, limit: number, onRefused?: (bytes: number) => void, onRead?: (bytes: number) => void): Response {
  const type = response.headers.get('content-type') ?? '';
  const framing = type.includes('text/event-stream') ? 'sse' : type.includes('json') ? 'whole' : undefined;
  if (!response.ok || !response.body || framing === undefined) return response;
  const body = boundedBody(response.body, framing, limit, onRefused && ((bytes) => onRefused(bytes)), onRead);
  const headers = new Headers(response.headers);
  // The length changes when a message is replaced.
  headers.delete('content-length');
  const wrapped = new Response(body, { status: response.status, statusText: response.statusText, headers });
  Object.defineProperty(wrapped, 'url', { value: response.url });
  return wrapped;
}
