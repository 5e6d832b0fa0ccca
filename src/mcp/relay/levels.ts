/**
 * `logging/setLevel` towards upstreams. A 2025-era upstream connection is shared by every session, and the level is a
 * property of that connection, so no one session's level can be forwarded as it is. toolrouter forwards the most
 * verbose level any live session asked for (none asked: nothing is sent, the servers choose), and each session's
 * channel drops what is below its own level (session.ts): every session gets what it asked for, and a server sends no
 * more than the most demanding session wants. When that session goes, the level is raised again to what the remaining
 * ones asked for; when none is left, the last level stays (MCP has no way to unset it).
 *
 * A 2026-07-28 upstream takes the level per request (`_meta` "io.modelcontextprotocol/logLevel"): there each call
 * carries its own session's level (calls.ts), and nothing here is needed.
 */
import { LOG_LEVELS, type LogLevel } from './channel.js';

/** The most verbose of the levels; undefined for none. */
export function mostVerbose(levels: Iterable<LogLevel>): LogLevel | undefined {
  let best: number | undefined;
  for (const level of levels) {
    const rank = LOG_LEVELS.indexOf(level);
    if (best === undefined || rank < best) best = rank;
  }
  return best === undefined ? undefined : LOG_LEVELS[best];
}

export class LogLevels {
  private readonly bySession = new Map<string, LogLevel>();
  private forwarded: LogLevel | undefined;

  constructor(private readonly forward: (level: LogLevel) => void) {}

  /** What the upstreams were last told (for a connection made later and for tests). */
  get current(): LogLevel | undefined {
    return this.forwarded;
  }

  set(session: string, level: LogLevel): void {
    this.bySession.set(session, level);
    this.update();
  }

  drop(session: string): void {
    if (this.bySession.delete(session)) this.update();
  }

  private update(): void {
    const wanted = mostVerbose(this.bySession.values());
    if (wanted === undefined || wanted === this.forwarded) return;
    this.forwarded = wanted;
    this.forward(wanted);
  }
}
