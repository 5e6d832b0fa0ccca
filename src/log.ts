import pino, { type Logger } from 'pino';

/** JSON logs on stderr, so stdout stays free for the stdio MCP transport. */
export function createLogger(level: string, destination: pino.DestinationStream = pino.destination(2)): Logger {
  // Secrets never reach a log line, whatever object a log call is handed.
  const redact = ['adminKey', 'chat.upstreamKey', 'req.headers.authorization', 'req.headers["x-toolrouter-key"]', 'headers.authorization', 'headers["x-toolrouter-key"]'];
  return pino({ level, base: { service: 'toolrouter' }, redact }, destination);
}
