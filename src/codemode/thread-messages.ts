/** The messages between the main thread (sandbox.ts) and a sandbox thread (thread.ts). */
import type { EngineLimits, EngineOutcome } from './quickjs.js';

/** Main thread → sandbox thread. */
export type ThreadRequest =
  | { type: 'run'; run: number; code: string; limits: EngineLimits }
  /** The answer to a host call: JSON text, or why the bridge itself failed. */
  | { type: 'answer'; call: number; text?: string; error?: string };

/** Sandbox thread → main thread. */
export type ThreadReply =
  | { type: 'host'; run: number; call: number; op: 'call' | 'search'; payload: string }
  | { type: 'done'; run: number; outcome: EngineOutcome };
