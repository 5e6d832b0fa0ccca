import pino, { type Logger } from 'pino';

/** JSON logs on stderr, so stdout stays free for the stdio MCP transport. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'toolrouter' }, redact: ['adminKey', 'req.headers.authorization'] }, pino.destination(2));
}
